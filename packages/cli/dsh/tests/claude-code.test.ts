/**
 * `dsh run` with a scripted parent delegating to the real Claude Code binary, which is
 * pointed at the fake Messages API: the composition in examples/claude-code.yml, with
 * only the child's environment replaced to keep it offline.
 */
import { existsSync, mkdirSync, readFileSync, readdirSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import YAML from 'yaml'
import { startFakeAnthropicMessages, type FakeAnthropicMessages } from '@dsh/testkit'
import { repoRoot, runDsh, tempDir } from './cli.js'

let fake: FakeAnthropicMessages | undefined
afterEach(async () => {
  await fake?.close()
  fake = undefined
})

interface Entry {
  id: string
  name: string
  config: Record<string, unknown>
}

/** examples/claude-code.yml with the child pointed at the fake server and a throw-away HOME; `edit` changes the entries further. */
function offlineConfig(dir: string, server: FakeAnthropicMessages, home: string, edit: (entries: Entry[], provider: Entry) => void = () => {}): string {
  const entries = YAML.parse(readFileSync(join(repoRoot, 'examples/claude-code.yml'), 'utf8')) as Entry[]
  const provider = entries.find((entry) => entry.name === '@dsh/subagent-claude-code')!
  edit(entries, provider)
  const configDir = join(home, '.claude')
  mkdirSync(configDir, { recursive: true })
  writeFileSync(join(configDir, 'settings.json'), JSON.stringify({ permissions: { defaultMode: 'default' } }))
  provider.config.env = {
    ...(provider.config.env as Record<string, string>),
    ANTHROPIC_BASE_URL: server.url,
    ANTHROPIC_API_KEY: 'sk-ant-fake',
    CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1',
    CLAUDE_CODE_MAX_RETRIES: '0',
    HOME: home,
    CLAUDE_CONFIG_DIR: configDir,
  }
  const file = join(dir, 'claude-code.yml')
  writeFileSync(file, YAML.stringify(entries))
  return file
}

/** Pids of live processes whose environment holds `HOME=<home>`: the child and anything it started. */
function processesWithHome(home: string): number[] {
  const found: number[] = []
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue
    try {
      if (readFileSync(`/proc/${entry}/environ`, 'utf8').split('\0').includes(`HOME=${home}`)) found.push(Number(entry))
    } catch {
      // Gone meanwhile, or not ours to read: either way not a leftover child of this test.
    }
  }
  return found
}

describe('dsh run delegating to Claude Code', () => {
  it('a scripted parent delegates through subagent_claude and prints the child\'s answer', async () => {
    fake = await startFakeAnthropicMessages([{ text: 'Paris is the capital of France.' }])
    const dir = tempDir()
    const home = tempDir('dsh-cc-home-')
    const config = offlineConfig(dir, fake, home)
    const result = await runDsh(
      ['run', '--config', config, '--model', 'scripted:examples/claude-code-parent.yml', '--session-dir', dir, 'ask Claude Code about France'],
      { timeoutMs: 45_000 },
    )
    expect(result.code, result.stderr).toBe(0)
    // stderr carries the CLI's progress lines; no warning (e.g. from the SDK) may join them.
    expect(result.stderr).not.toMatch(/warn|error/i)
    // The answer only: the text of the step that delegated is not printed.
    expect(result.stdout).not.toContain('Asking Claude Code.')
    expect(result.stdout).toContain('Claude Code answered: Paris is the capital of France.')
    expect(fake.messageRequests).toHaveLength(1)
    expect(JSON.stringify(fake.messageRequests[0]!.body)).toContain('What is the capital of France? Answer in one sentence.')
    expect(processesWithHome(home)).toEqual([])
  })

  it('with --permission reject, a rule in dsh.yml lets a Claude Code command run, and one no rule allows is denied; both are recorded in the parent\'s session naming the child', async () => {
    const dir = tempDir()
    const made = join(dir, 'made-by-rule')
    const refused = join(dir, 'refused-dir')
    fake = await startFakeAnthropicMessages([
      { toolUses: [{ name: 'Bash', input: { command: `touch ${made}`, description: 'make a marker' } }] },
      { toolUses: [{ id: 'toolu_mkdir', name: 'Bash', input: { command: `mkdir ${refused}`, description: 'make a directory' } }] },
      { text: 'One of two.' },
    ])
    const home = tempDir('dsh-cc-home-')
    // The example pins permissionMode deny; here it is left to its default, ask: asks go to dsh's broker.
    const config = offlineConfig(dir, fake, home, (entries, provider) => {
      delete provider.config.permissionMode
      entries.unshift({ id: 'approvals', name: '@dsh/approvals', config: { allow: ['bash(touch *)'] } })
    })
    const script = join(dir, 'parent.yml')
    writeFileSync(script, ['- when: { depth: 0 }', '  reply:', '    - call: { tool: subagent_claude, args: { description: "make markers", prompt: "Make the markers." } }', '    - text: "Claude Code answered: {{last_tool_result}}"'].join('\n'))
    const result = await runDsh(['run', '--config', config, '--model', `scripted:${script}`, '--session-dir', dir, '--permission', 'reject', 'go'], { cwd: dir, timeoutMs: 45_000 })
    expect(result.code, result.stderr).toBe(0)
    expect(result.stdout).toContain('Claude Code answered: One of two.')
    expect(existsSync(made)).toBe(true)
    expect(existsSync(refused)).toBe(false)
    expect(result.stderr).toContain('dsh: bash was not run: nobody is asked when dsh run is not on a terminal')
    expect(approvalEventsIn(dir)).toMatchObject([
      { request: { path: ['dsh', 'claude-code "make markers"'], tool: 'bash', subject: `touch ${made}`, child: expect.stringMatching(/^claude-code:[0-9a-f-]{36}$/) }, permission: { decision: 'allow-once', source: 'rule', rule: 'bash(touch *) (config)' } },
      { request: { path: ['dsh', 'claude-code "make markers"'], tool: 'bash', subject: `mkdir ${refused}` }, permission: { decision: 'reject', source: 'default', by: 'dsh run --permission reject' } },
    ])
    // The model read why the second command was refused.
    const followUp = JSON.stringify(fake.messageRequests[2]!.body)
    expect(followUp).toContain('Permission denied by dsh run --permission reject: nobody is there to ask')
    expect(processesWithHome(home)).toEqual([])
  })
})

/** The approval events of every session file in `dir` (a remote child's decisions are in its parent's session). */
function approvalEventsIn(dir: string): Array<Record<string, unknown>> {
  return readdirSync(dir)
    .filter((name) => name.endsWith('.jsonl'))
    .flatMap((name) =>
      readFileSync(join(dir, name), 'utf8')
        .trim()
        .split('\n')
        .map((line) => JSON.parse(line) as Record<string, unknown>)
        .filter((record) => record.type === 'approval'),
    )
}
