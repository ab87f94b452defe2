/**
 * `dsh run` with a scripted parent delegating to the real Codex app-server, pointed at
 * the fake Responses API: examples/codex.yml as it is, with a throw-away CODEX_HOME (whose
 * config.toml names the fake server) in dsh's environment, which the child inherits.
 */
import { existsSync, readFileSync, readdirSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { startFakeOpenAIResponses, type FakeOpenAIResponses } from '@dsh/testkit'
import { repoRoot, runDsh, tempDir } from './cli.js'

let fake: FakeOpenAIResponses | undefined
afterEach(async () => {
  await fake?.close()
  fake = undefined
})

/**
 * A CODEX_HOME for the fake server, per the offline recipe (no retries, update check,
 * analytics or plugins). No `env_key`: the fake needs no key, and a key variable would be
 * credential-shaped, which the child does not inherit unless the provider's `env` sets it.
 */
function codexHome(server: FakeOpenAIResponses): string {
  const home = tempDir('dsh-codex-home-')
  writeFileSync(
    join(home, 'config.toml'),
    `model = "gpt-5.5"
model_provider = "fake"
check_for_update_on_startup = false

[model_providers.fake]
name = "fake"
base_url = "${server.url}"
wire_api = "responses"
request_max_retries = 0
stream_max_retries = 0

[analytics]
enabled = false

[features]
plugins = false
`,
  )
  return home
}

/** Pids of live processes started with `CODEX_HOME=<home>`: the app-server and anything it ran. */
function processesWithCodexHome(home: string): number[] {
  const found: number[] = []
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue
    try {
      if (readFileSync(`/proc/${entry}/stat`, 'utf8').split(') ')[1]?.startsWith('Z')) continue
      if (readFileSync(`/proc/${entry}/environ`, 'utf8').split('\0').includes(`CODEX_HOME=${home}`)) found.push(Number(entry))
    } catch {
      // Gone meanwhile: not a leftover.
    }
  }
  return found
}

describe('dsh run delegating to Codex', () => {
  it("a scripted parent delegates through subagent_codex and prints the child's answer", async () => {
    fake = await startFakeOpenAIResponses([{ text: '42' }])
    const dir = tempDir()
    const home = codexHome(fake)
    const result = await runDsh(
      ['run', '--config', join(repoRoot, 'examples/codex.yml'), '--model', 'scripted:examples/codex-parent.yml', '--session-dir', dir, 'ask Codex what 6 times 7 is'],
      { env: { CODEX_HOME: home, HOME: home }, timeoutMs: 45_000 },
    )
    expect(result.code, result.stderr).toBe(0)
    // The answer only: the text of the step that delegated is not printed.
    expect(result.stdout).not.toContain('Asking Codex.')
    expect(result.stdout).toContain('Codex answered: 42')
    expect(result.stderr).toMatch(/\[subagent\] end codex \S+ completed/)
    expect(fake.requests).toHaveLength(1)
    expect(JSON.stringify(fake.requests[0].body)).toContain('What is 6 times 7? Answer with the number only.')
    expect(processesWithCodexHome(home)).toEqual([])
  })

  it('examples/codex.yml without a Codex login ends at once with one line saying Codex is not logged in, never a silent wait', async () => {
    const dir = tempDir()
    const home = tempDir('dsh-codex-nologin-')
    const result = await runDsh(
      ['run', '--config', join(repoRoot, 'examples/codex.yml'), '--model', 'scripted:examples/codex-parent.yml', '--session-dir', dir, 'ask Codex what 6 times 7 is'],
      { env: { CODEX_HOME: home, HOME: home }, timeoutMs: 45_000 },
    )
    expect(result.code, result.stderr).toBe(0)
    const notLoggedIn = `Codex is not logged in (CODEX_HOME ${home}); run \`codex login\``
    // The delegation's tool result, which the example's parent quotes: one line, no Codex started.
    expect(result.stdout.split('\n').filter((line) => line.includes(notLoggedIn))).toEqual([expect.stringMatching(/^Codex answered: the subagent could not be started: the codex app-server has no model to ask: /)])
    expect(processesWithCodexHome(home)).toEqual([])
  })

  it('with --permission reject, a rule in dsh.yml lets a Codex command run, and one no rule allows is declined; both are recorded in the parent\'s session naming the child', async () => {
    fake = await startFakeOpenAIResponses([
      { toolCalls: [{ callId: 'call_touch', name: 'exec_command', arguments: { cmd: 'touch made-by-rule' } }] },
      { toolCalls: [{ callId: 'call_mkdir', name: 'exec_command', arguments: { cmd: 'mkdir refused-dir' } }] },
      { text: 'one of two' },
    ])
    const dir = tempDir()
    const home = codexHome(fake)
    const config = join(dir, 'dsh.yml')
    // The provider's permissionMode is left to its default, ask: Codex's approvals go to dsh's broker.
    writeFileSync(
      config,
      [
        '- id: approvals',
        '  name: "@dsh/approvals"',
        '  config: { allow: ["bash(touch *)"] }',
        '- id: subagent-codex',
        '  name: "@dsh/subagent-codex"',
        '  config: { providerName: codex }',
        '- id: tool-subagent-codex',
        '  name: "@dsh/tool-subagent"',
        '  config: { provider: codex, toolName: subagent_codex }',
      ].join('\n'),
    )
    const script = join(dir, 'parent.yml')
    writeFileSync(script, ['- when: { depth: 0 }', '  reply:', '    - call: { tool: subagent_codex, args: { description: "make markers", prompt: "Make the markers." } }', '    - text: "Codex answered: {{last_tool_result}}"'].join('\n'))
    const result = await runDsh(['run', '--config', config, '--model', `scripted:${script}`, '--session-dir', dir, '--permission', 'reject', 'go'], { cwd: dir, env: { CODEX_HOME: home, HOME: home }, timeoutMs: 45_000 })
    expect(result.code, result.stderr).toBe(0)
    expect(result.stdout).toContain('Codex answered: one of two')
    expect(existsSync(join(dir, 'made-by-rule'))).toBe(true)
    expect(existsSync(join(dir, 'refused-dir'))).toBe(false)
    expect(result.stderr).toContain('dsh: bash was not run: nobody is asked when dsh run is not on a terminal')
    const approvals = approvalEventsIn(dir)
    expect(approvals).toMatchObject([
      { request: { path: ['dsh', 'codex "make markers"'], tool: 'bash', subject: 'touch made-by-rule', child: expect.stringMatching(/^codex:[0-9a-f-]{36}$/) }, permission: { decision: 'allow-once', source: 'rule', rule: 'bash(touch *) (config)' } },
      { request: { path: ['dsh', 'codex "make markers"'], tool: 'bash', subject: 'mkdir refused-dir' }, permission: { decision: 'reject', source: 'default', by: 'dsh run --permission reject' } },
    ])
    // What Codex told its model of the declined command.
    const followup = (fake.requests[2]!.body as { input: { type: string; call_id?: string; output?: string }[] }).input
    expect(followup.find((item) => item.type === 'function_call_output' && item.call_id === 'call_mkdir')?.output).toMatch(/rejected/)
    expect(processesWithCodexHome(home)).toEqual([])
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
