/** Every command's usage and configuration errors: one readable line, exit 2, never a stack trace. */
import { existsSync, readdirSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { runDsh, tempDir } from './cli.js'

function config(text: string): string {
  const file = join(tempDir(), 'dsh.yml')
  writeFileSync(file, text)
  return file
}

const cases: Array<[string, () => string[], string | RegExp]> = [
  ['an unknown option', () => ['run', '--modle', 'x', 'hi'], 'dsh run: unknown option --modle; did you mean --model? (dsh run --help lists the options'],
  ['an unknown option of another verb, far from every known one', () => ['sessions', 'list', '--frobnicate'], 'dsh sessions: unknown option --frobnicate (dsh sessions --help lists the options)'],
  ['an option without its value', () => ['run', 'hi', '--model'], 'dsh run: --model needs a value (dsh run --help lists the options)'],
  ['run without a prompt', () => ['run', '--model', 'scripted:x'], 'dsh run: a PROMPT is required'],
  ['an unknown sessions verb', () => ['sessions', 'frobnicate'], 'dsh sessions: unknown verb "frobnicate"'],
  ['config without check', () => ['config'], 'dsh config: the only verb is `check`'],
  ['a missing config file', () => ['run', '--config', '/nonexistent/dsh.yml', '--model', 'scripted:x', 'hi'], 'cannot read config /nonexistent/dsh.yml'],
  ['a plugin that cannot be loaded', () => ['config', 'check', '--config', config('- name: "@dsh/no-such-plugin"\n')], 'plugin "@dsh/no-such-plugin": cannot load @dsh/no-such-plugin'],
  ['a nested unknown key', () => ['run', '--model', 'scripted:x', '--config', config('- id: tool-subagent\n  name: "@dsh/tool-subagent"\n  config: { provider: spawn, toolFilter: { alow: [bash] } }\n'), 'hi'], 'unknown config key "toolFilter.alow" (allowed there: allow, deny)'],
  ['a config value of the wrong type', () => ['config', 'check', '--config', config('- id: agents\n  name: "@dsh/agent"\n  config: { persona: 42 }\n')], /plugin "agents" \(@dsh\/agent\): invalid config: .*persona/],
  ['acp with a bad --max-depth', () => ['acp', '--model', 'scripted:x', '--max-depth', '-1'], /--max-depth/],
  ['sessions show without an id', () => ['sessions', 'show'], 'dsh sessions show: which session?'],
]

describe.concurrent('usage and configuration errors', () => {
  for (const [name, args, says] of cases) {
    it(`${name}: one line, exit 2, no stack trace`, async () => {
      const result = await runDsh(args(), { env: { DSH_HOME: tempDir('dsh-home-') } })
      expect(result.code, result.stderr).toBe(2)
      const lines = result.stderr.trim().split('\n')
      expect(lines, result.stderr).toHaveLength(1)
      expect(result.stderr).not.toMatch(/^\s+at /m)
      if (typeof says === 'string') expect(lines[0]).toContain(says)
      else expect(lines[0]).toMatch(says)
    })
  }

  const yamlErrors: Array<[string, string, RegExp, string]> = [
    ['config that is not YAML', '- name: [unclosed\n', /is not valid YAML: .*at line \d+, column \d+:$/, '[unclosed'],
    ['a YAML tag nobody resolves', '- name: !nope "@dsh/agent"\n', /is not valid YAML: Unresolved tag: !nope/, '!nope'],
  ]
  for (const [name, text, headline, quoted] of yamlErrors) {
    it(`${name}: a line naming the file, then the offending line of it, exit 2, no stack trace`, async () => {
      const file = config(text)
      const result = await runDsh(['config', 'check', '--config', file])
      expect(result.code, result.stderr).toBe(2)
      const [first, ...snippet] = result.stderr.trimEnd().split('\n')
      expect(first).toContain(`${file} is not valid YAML: `)
      expect(first).toMatch(headline)
      expect(snippet.length, result.stderr).toBeGreaterThan(0)
      expect(snippet.every((line) => line.startsWith('    ')), result.stderr).toBe(true)
      expect(snippet.join('\n')).toContain(quoted)
      expect(result.stderr).not.toMatch(/^\s+at /m)
    })
  }

  const notReady: Array<[string, () => string[], string]> = [
    [
      'an explicit maxDepth on a provider that cannot enforce depth (the provider registers after the tool)',
      () => ['--config', config('- name: "@dsh/subagent-codex"\n- id: t\n  name: "@dsh/tool-subagent"\n  config: { provider: codex, toolName: codex, maxDepth: 2 }\n'), '--model', 'scripted:examples/hello.yml'],
      'tool "codex" sets maxDepth 2, but subagent provider "codex" cannot enforce a depth limit',
    ],
    [
      'a tool bound to a provider nobody registers',
      () => ['--config', config('- id: t\n  name: "@dsh/tool-subagent"\n  config: { provider: spwan, toolName: helper }\n'), '--model', 'scripted:examples/hello.yml'],
      'tool "helper" is bound to subagent provider "spwan", which is not registered',
    ],
    ['a model spec naming no loaded adapter', () => ['--model', 'bogus:x'], 'model spec "bogus:x" names adapter "bogus", which is not loaded'],
    ['a scripted model whose file is missing', () => ['--model', 'scripted:/nonexistent/script.yml'], '/nonexistent/script.yml'],
  ]
  for (const [name, args, says] of notReady) {
    it(`${name}: the same one line and exit 2 from config check, run and acp, before any session`, async () => {
      const sessions = join(tempDir(), 'sessions')
      const common = [...args(), '--session-dir', sessions]
      const [check, run, acp] = await Promise.all([
        runDsh(['config', 'check', ...common]),
        runDsh(['run', ...common, 'hello']),
        runDsh(['acp', ...common], { input: '' }),
      ])
      for (const result of [check, run, acp]) {
        expect(result.code, result.stderr).toBe(2)
        expect(result.stderr.trim().split('\n'), result.stderr).toHaveLength(1)
        expect(result.stderr).toContain(says)
      }
      expect(run.stderr).toBe(check.stderr)
      expect(acp.stderr).toBe(check.stderr)
      expect(existsSync(sessions) ? readdirSync(sessions) : []).toEqual([])
    })
  }

  it('a plugin whose start throws: one line without --verbose; with it, the logged error keeps its stack', async () => {
    const dir = tempDir()
    writeFileSync(join(dir, 'broken.cjs'), "module.exports = { name: 'broken', apply() { throw new Error('disk on fire') } }\n")
    const file = join(dir, 'dsh.yml')
    writeFileSync(file, '- id: broken\n  name: ./broken.cjs\n')
    const args = ['run', '--config', file, '--model', 'scripted:examples/hello.yml', '--session-dir', join(dir, 'sessions'), 'hello']
    const [quiet, verbose] = await Promise.all([runDsh(args), runDsh([...args, '--verbose'])])
    for (const result of [quiet, verbose]) {
      expect(result.code, result.stderr).toBe(2)
      expect(result.stderr).toContain('plugin "broken" (./broken.cjs) failed to start: disk on fire')
    }
    expect(quiet.stderr.trim().split('\n'), quiet.stderr).toHaveLength(1)
    expect(verbose.stderr).toMatch(/disk on fire\n\s+at /)
  })

  it('config check and run report the same configuration error with the same exit code', async () => {
    const file = config('- id: tool-subagent\n  name: "@dsh/tool-subagent"\n  config: { provider: spawn, toolFilter: { dney: [bash] } }\n')
    const check = await runDsh(['config', 'check', '--config', file])
    const run = await runDsh(['run', '--config', file, '--model', 'scripted:examples/hello.yml', 'hello'])
    expect(check.code).toBe(2)
    expect(run.code).toBe(2)
    expect(check.stderr).toBe(run.stderr)
    expect(check.stderr).toContain(`dsh: config ${file}: plugin "tool-subagent" (@dsh/tool-subagent): unknown config key "toolFilter.dney"`)
  })
})
