/**
 * The provider against the real, pinned `codex app-server`, pointed at the fake Responses
 * server on 127.0.0.1 through a throw-away CODEX_HOME. No network beyond loopback.
 */
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs'
import { createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { text } from '@dsh/llm'
import type { Agent } from '@dsh/agent'
import { SubagentService, type SubagentRequest, type SubagentRun, type SubagentRunEndInfo } from '@dsh/subagent'
import { startFakeOpenAIResponses, type FakeOpenAIResponses, type FakeResponsesAnswer } from '@dsh/testkit'
import { createHarness, type Harness } from '@dsh/testkit/harness'
import { CodexPlugin } from '../src/index.js'
import { appServerPids, codexHome, environOf, exists, waitFor } from './helpers.js'

let harness: Harness | undefined
let fake: FakeOpenAIResponses | undefined
let parent: Agent
let workdir: string
const runs: SubagentRun[] = []

afterEach(async () => {
  await Promise.all(runs.splice(0).map((run) => run.dispose()))
  await harness?.dispose()
  await fake?.close()
  harness = undefined
  fake = undefined
})

async function setup(answers: FakeResponsesAnswer[], config: Record<string, unknown> = {}) {
  fake = await startFakeOpenAIResponses(answers)
  const home = codexHome(fake.url)
  harness = await createHarness()
  await harness.plugin(SubagentService)
  await harness.plugin(CodexPlugin, { env: { CODEX_HOME: home, HOME: home, FAKE_CODEX_API_KEY: 'sk-fake' }, graceMs: 500, ...config })
  workdir = mkdtempSync(join(tmpdir(), 'dsh-codex-work-'))
  parent = await harness.agent({ meta: { cwd: workdir } })
}

const request = (prompt: string, extra: Partial<SubagentRequest> = {}): SubagentRequest => ({ prompt: [text(prompt)], parent, signal: new AbortController().signal, ...extra })

async function start(prompt: string, extra: Partial<SubagentRequest> = {}): Promise<SubagentRun> {
  const run = await harness!.ctx.subagents.start('codex', request(prompt, extra))
  runs.push(run)
  return run
}

/** The text of a Responses request's `input`, for asserting what Codex sent the model. */
function inputText(body: unknown): string {
  return JSON.stringify((body as { input: unknown }).input)
}

describe('codex provider against the real app-server', () => {
  it('a completed run returns the fake model\'s text, in the parent session\'s cwd, with a clean environment', async () => {
    await setup([{ text: 'The answer is 42.' }])
    process.env.DSH_CODEX_TEST_SECRET = 'must-not-leak'
    let run: SubagentRun
    try {
      run = await start('What is the answer?')
    } finally {
      delete process.env.DSH_CODEX_TEST_SECRET
    }
    const [pid] = await waitFor(() => appServerPids().length > 0 && appServerPids(), 'the app-server process')
    const env = environOf(pid)
    expect(env.CODEX_HOME).toBeDefined()
    expect(env.DSH_CODEX_TEST_SECRET).toBeUndefined()
    expect(env.FAKE_CODEX_API_KEY).toBe('sk-fake')

    // Usage is Codex's own count of the model call (the fake estimates it), summed over the turn.
    expect(await run.result).toEqual({ output: [text('The answer is 42.')], stopReason: 'completed', usage: { inputTokens: expect.any(Number), outputTokens: expect.any(Number), cachedInputTokens: 0 } })
    expect(run.local).toBe(false)
    // One child-id format for every out-of-process provider: <provider>:<codex thread id>.
    expect(run.id).toMatch(/^codex:[0-9a-f-]{36}$/)
    expect(fake!.requests).toHaveLength(1)
    const sent = inputText(fake!.requests[0].body)
    expect(sent).toContain('What is the answer?')
    expect(sent).toContain(`<cwd>${workdir}</cwd>`)
    await run.dispose()
    expect(exists(pid)).toBe(false)
  })

  it('emits subagent/start and subagent/end around the run', async () => {
    await setup([{ text: 'done' }])
    const ends: SubagentRunEndInfo[] = []
    harness!.ctx.on('subagent/end', (info) => void ends.push(info))
    const run = await start('go', { label: 'a codex task' })
    await run.result
    await run.dispose()
    expect(ends).toEqual([expect.objectContaining({ provider: 'codex', id: run.id, local: false, stopReason: 'completed', label: 'a codex task', lastAssistantMessage: [text('done')] })])
  })

  it('an HTTP 500 from the model settles error with a diagnostic', async () => {
    await setup([{ status: 500, error: 'upstream exploded' }])
    const run = await start('hi')
    const result = await run.result
    expect(result.stopReason).toBe('error')
    expect(result.diagnostic).toMatch(/^model-error during turn: internalServerError: /)
  })

  it('a stream without response.completed settles error, and the partial text survives', async () => {
    await setup([{ text: 'half an answer', omitCompleted: true }])
    const run = await start('hi')
    const result = await run.result
    expect(result.stopReason).toBe('error')
    expect(result.diagnostic).toContain('model-error during turn')
    expect(result.diagnostic).toContain('response.completed')
    expect(result.output).toEqual([text('half an answer')])
  })

  it('a crashed app-server (SIGKILL mid-turn) settles error naming the stage and the signal', async () => {
    await setup([{ text: 'never sent', delayMs: 30_000 }])
    const run = await start('hi')
    await waitFor(() => fake!.requests.length > 0, 'the model request')
    const [pid] = appServerPids()
    process.kill(pid, 'SIGKILL')
    const result = await run.result
    expect(result.stopReason).toBe('error')
    expect(result.diagnostic).toMatch(/^crash during turn: the codex app-server was killed by SIGKILL/)
    expect(result.diagnostic).not.toContain('\n')
  })

  it('cancel mid-turn resolves aborted and leaves no process behind', async () => {
    await setup([{ text: 'too late', delayMs: 30_000 }])
    const run = await start('hi')
    await waitFor(() => fake!.requests.length > 0, 'the model request')
    const [pid] = appServerPids()
    run.cancel()
    const result = await run.result
    expect(result.stopReason).toBe('aborted')
    await run.dispose()
    expect(exists(pid)).toBe(false)
    expect(appServerPids()).toEqual([])
  })

  it('aborting the request signal after publication cancels the turn', async () => {
    await setup([{ text: 'too late', delayMs: 30_000 }])
    const controller = new AbortController()
    const run = await start('hi', { signal: controller.signal })
    await waitFor(() => fake!.requests.length > 0, 'the model request')
    controller.abort()
    expect((await run.result).stopReason).toBe('aborted')
  })

  it('declines a shell command approval by default, records it, and the turn goes on', async () => {
    await setup([{ toolCalls: [{ callId: 'call_touch', name: 'exec_command', arguments: { cmd: 'touch declined.txt' } }] }, { text: 'I was not allowed to.' }])
    const run = await start('create declined.txt')
    const result = await run.result
    expect(result).toMatchObject({ stopReason: 'completed', output: [text('I was not allowed to.')] })
    expect(result.diagnostic).toMatch(/^declined command ".*touch declined\.txt.*"$/)
    expect(existsSync(join(workdir, 'declined.txt'))).toBe(false)
    // What Codex told the model about the declined call.
    const followup = (fake!.requests[1].body as { input: { type: string; call_id?: string; output?: string }[] }).input
    expect(followup.find((item) => item.type === 'function_call_output' && item.call_id === 'call_touch')?.output).toMatch(/rejected/)
  })

  it('accepts the command in permissionMode accept', async () => {
    await setup([{ toolCalls: [{ callId: 'call_touch', name: 'exec_command', arguments: { cmd: 'touch accepted.txt', sandbox_permissions: 'require_escalated', justification: 'test' } }] }, { text: 'done' }], {
      permissionMode: 'accept',
    })
    const run = await start('create accepted.txt')
    const result = await run.result
    expect(result).toMatchObject({ stopReason: 'completed', output: [text('done')] })
    expect(result.diagnostic).toBeUndefined()
    expect(existsSync(join(workdir, 'accepted.txt'))).toBe(true)
  })

  it('a turn past timeoutMs is interrupted and settles error', async () => {
    await setup([{ text: 'too late', delayMs: 30_000 }], { timeoutMs: 300 })
    const run = await start('hi')
    const result = await run.result
    expect(result.stopReason).toBe('error')
    expect(result.diagnostic).toMatch(/^timeout during turn: the codex app-server did not finish within timeoutMs \(300 ms\)/)
  })

  it('a pre-aborted signal rejects without spawning anything', async () => {
    await setup([{ text: 'unused' }])
    const controller = new AbortController()
    controller.abort()
    await expect(harness!.ctx.subagents.start('codex', request('hi', { signal: controller.signal }))).rejects.toMatchObject({ code: 'ABORTED' })
    expect(appServerPids()).toEqual([])
    expect(fake!.requests).toHaveLength(0)
  })

  it('cancelling while the app-server starts rejects ABORTED and reaps it', async () => {
    await setup([{ text: 'unused' }])
    const controller = new AbortController()
    const started = harness!.ctx.subagents.start('codex', request('hi', { signal: controller.signal }))
    await waitFor(() => appServerPids().length > 0, 'the app-server process')
    controller.abort()
    await expect(started).rejects.toMatchObject({ code: 'ABORTED', message: expect.stringMatching(/stage (spawn|initialize|account\/read|thread\/start|turn\/start)/) })
    expect(appServerPids()).toEqual([])
  })

  it('a broken config.toml fails the start with START_FAILED naming the stage and Codex\'s complaint', async () => {
    await setup([{ text: 'unused' }])
    const broken = mkdtempSync(join(tmpdir(), 'dsh-codex-broken-'))
    writeFileSync(join(broken, 'config.toml'), 'model = \n')
    await harness!.plugin(CodexPlugin, { providerName: 'codex-broken', env: { CODEX_HOME: broken, HOME: broken } })
    const started = harness!.ctx.subagents.start('codex-broken', request('hi'))
    await expect(started).rejects.toMatchObject({ code: 'START_FAILED' })
    const error = await started.catch((caught: Error) => caught)
    expect((error as Error).message).toMatch(/^the codex app-server refused thread\/start: failed to load configuration: .*config\.toml/)
    expect(appServerPids()).toEqual([])
  })

  it('without a login (an empty CODEX_HOME: OpenAI\'s provider, nobody logged in) the start fails in one line saying so and how to log in', async () => {
    await setup([{ text: 'unused' }])
    const empty = mkdtempSync(join(tmpdir(), 'dsh-codex-nologin-'))
    await harness!.plugin(CodexPlugin, { providerName: 'codex-nologin', env: { CODEX_HOME: empty, HOME: empty } })
    const error = await harness!.ctx.subagents.start('codex-nologin', request('hi')).then(
      () => undefined,
      (caught: Error & { code?: string }) => caught,
    )
    expect(error).toMatchObject({ code: 'START_FAILED' })
    expect(error!.message.split('\n')).toHaveLength(1)
    expect(error!.message).toMatch(new RegExp(`^the codex app-server has no model to ask: Codex is not logged in \\(CODEX_HOME ${empty}\\); run \`codex login\``))
    expect(appServerPids()).toEqual([])
  })

  it('a model endpoint that refuses connections (a closed port on 127.0.0.1) ends the turn error in one line with Codex\'s own words, its retries shown as progress', async () => {
    const closed = await closedPort()
    const home = codexHome(`http://127.0.0.1:${closed}/v1`)
    // Codex's own retry policy (no request_max_retries in its config): it would wait for the network for ever.
    writeFileSync(join(home, 'config.toml'), readFileSync(join(home, 'config.toml'), 'utf8').replace(/^(request|stream)_max_retries = 0\n/gm, ''))
    harness = await createHarness()
    await harness.plugin(SubagentService)
    await harness.plugin(CodexPlugin, { env: { CODEX_HOME: home, HOME: home, FAKE_CODEX_API_KEY: 'sk-fake' }, graceMs: 500, modelRetryLimitMs: 0 })
    parent = await harness.agent({ meta: { cwd: mkdtempSync(join(tmpdir(), 'dsh-codex-work-')) } })
    const statuses: string[] = []
    harness.ctx.on('subagent/progress', (info) => {
      for (const update of info.updates) if (update.kind === 'status') statuses.push(update.text)
    })
    const run = await start('hi')
    const result = await run.result
    expect(result.stopReason).toBe('error')
    expect(result.diagnostic!.split('\n')).toHaveLength(1)
    expect(result.diagnostic).toMatch(/^model-error during turn: codex could not reach its model \(1 retry in \d+ s, the last: Reconnecting\.\.\. .+\); check its login \(codex login\) or its model provider's base_url/)
    expect(statuses.some((status) => status.startsWith('codex: Reconnecting...'))).toBe(true)
    await waitFor(() => appServerPids().length === 0, 'the app-server to be stopped')
  })
})

/** A port on 127.0.0.1 nothing listens on: the OS's choice, released again. */
async function closedPort(): Promise<number> {
  const server = createServer()
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as { port: number }
  await new Promise<void>((resolve) => server.close(() => resolve()))
  return port
}
