/**
 * `dsh run` with a scripted parent delegating to the real Codex app-server, pointed at
 * the fake Responses API: examples/codex.yml as it is, with a throw-away CODEX_HOME (whose
 * config.toml names the fake server) in dsh's environment, which the child inherits.
 */
import { readFileSync, readdirSync, writeFileSync } from 'node:fs'
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
})
