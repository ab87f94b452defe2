/**
 * Failure paths the real binary will not produce on demand, against a small stand-in
 * (`fixtures/fake-app-server.mjs`) launched through the provider's test-only command override.
 */
import { fileURLToPath } from 'node:url'
import { afterEach, describe, expect, it } from 'vitest'
import { text } from '@dsh/llm'
import type { Agent } from '@dsh/agent'
import { SubagentService, type SubagentRequest, type SubagentRun } from '@dsh/subagent'
import { createHarness, type Harness } from '@dsh/testkit/harness'
import { CodexConfig, CodexProvider } from '../src/index.js'
import { appServerPids, exists, waitFor } from './helpers.js'

const fakeServer = fileURLToPath(new URL('./fixtures/fake-app-server.mjs', import.meta.url))

let harness: Harness | undefined
let parent: Agent
const runs: SubagentRun[] = []

afterEach(async () => {
  await Promise.all(runs.splice(0).map((run) => run.dispose()))
  await harness?.dispose()
  harness = undefined
})

async function setup(mode: string, config: Partial<CodexConfig> = {}) {
  harness = await createHarness()
  await harness.plugin(SubagentService)
  const provider = new CodexProvider(CodexConfig({ graceMs: 200, ...config }), { command: process.execPath, args: [fakeServer, mode], version: 'fake' })
  harness.ctx.subagents.registerProvider(provider)
  parent = await harness.agent()
}

const request = (extra: Partial<SubagentRequest> = {}): SubagentRequest => ({ prompt: [text('hi')], parent, signal: new AbortController().signal, ...extra })

async function start(): Promise<SubagentRun> {
  const run = await harness!.ctx.subagents.start('codex', request())
  runs.push(run)
  return run
}

describe('codex provider against a misbehaving app-server', () => {
  it('a server that exits at startup fails START_FAILED with the stage, the exit code and its stderr', async () => {
    await setup('exit-at-start')
    const error = await harness!.ctx.subagents.start('codex', request()).catch((caught: unknown) => caught)
    expect(error).toMatchObject({
      code: 'START_FAILED',
      message: 'the codex app-server exited with code 3 during initialize; stderr: error: could not load config.toml: expected `=`',
    })
    expect(appServerPids()).toEqual([])
  })

  it('a server that writes garbage at startup fails START_FAILED as a protocol error, and is reaped', async () => {
    await setup('garbage-at-start')
    const error = await harness!.ctx.subagents.start('codex', request()).catch((caught: unknown) => caught)
    expect(error).toMatchObject({ code: 'START_FAILED', message: expect.stringContaining('broke the protocol during initialize: the codex app-server wrote a line that is not JSON: "Welcome to not-codex 1.0"') })
    expect(appServerPids()).toEqual([])
  })

  it('garbage mid-turn settles error (protocol) and keeps the partial output', async () => {
    await setup('garbage-mid-turn')
    const run = await start()
    const result = await run.result
    expect(result.stopReason).toBe('error')
    expect(result.diagnostic).toMatch(/^protocol during turn: the codex app-server wrote a line that is not JSON/)
    expect(result.output).toEqual([text('partial ')])
  })

  it('garbage arriving in the same chunk as the turn/start reply still settles the run error', async () => {
    await setup('garbage-with-turn-reply')
    const run = await start()
    const result = await run.result
    expect(result.stopReason).toBe('error')
    expect(result.diagnostic).toMatch(/^protocol during turn: the codex app-server wrote a line that is not JSON: "not json at all"/)
  })

  it('an unknown server request gets a JSON-RPC error answer, never silence', async () => {
    await setup('unknown-request')
    const run = await start()
    const result = await run.result
    expect(result.stopReason).toBe('completed')
    const answer = JSON.parse(result.output[0].text) as { id: string; error: { code: number; message: string } }
    expect(answer).toMatchObject({ id: 'srv-1', error: { code: -32601, message: expect.stringContaining('x/brandNewRequest') } })
    expect(result.diagnostic).toBe('refused unknown request x/brandNewRequest')
  })

  it('a server that ignores the interrupt, stdin and SIGTERM is SIGKILLed: cancel aborts and dispose resolves once it is gone', async () => {
    await setup('stubborn')
    const run = await start()
    const [pid] = await waitFor(() => appServerPids().length > 0 && appServerPids(), 'the stand-in process')
    run.cancel()
    const result = await run.result
    expect(result).toMatchObject({ stopReason: 'aborted', diagnostic: expect.stringContaining('did not confirm turn/interrupt') })
    await run.dispose()
    expect(exists(pid)).toBe(false)
  })

  it('a spawn failure (missing cwd) fails START_FAILED at stage spawn', async () => {
    await setup('unused', { cwd: '/nonexistent/dsh-codex-cwd' })
    await expect(harness!.ctx.subagents.start('codex', request())).rejects.toMatchObject({ code: 'START_FAILED', message: expect.stringContaining('stage spawn') })
  })
})
