import { afterEach, describe, expect, it } from 'vitest'
import { SubagentError } from '@dsh/subagent'
import { fixture, liveChildren, setup, type Setup } from './helpers.js'
import { AcpChild } from '../src/child.js'
import { AcpProviderConfig, resolveAcpSpec } from '../src/config.js'

let current: Setup | undefined
afterEach(async () => {
  await current?.harness.dispose()
  current = undefined
})

async function provider(config: Record<string, unknown> & { command: string }): Promise<Setup> {
  current = await setup(config)
  return current
}

/** Start and expect a rejection; returns it with how long it took. No child may be left. */
async function failedStart(s: Setup, signal?: AbortSignal): Promise<{ error: SubagentError; ms: number }> {
  const before = liveChildren()
  const started = Date.now()
  const error = await s.harness.ctx.subagents.start('acp', s.request('hello', signal ? { signal } : {})).then(
    () => {
      throw new Error('start() fulfilled; expected it to reject')
    },
    (rejection: unknown) => rejection,
  )
  expect(error).toBeInstanceOf(SubagentError)
  expect(liveChildren()).toEqual(before)
  return { error: error as SubagentError, ms: Date.now() - started }
}

describe('acp: every startup failure reaps the process and rejects start()', () => {
  it('a command that does not exist rejects at stage spawn', async () => {
    const s = await provider({ command: 'dsh-no-such-program-anywhere' })
    const { error } = await failedStart(s)
    expect(error.code).toBe('START_FAILED')
    expect(error.message).toMatch(/stage spawn: cannot run "dsh-no-such-program-anywhere" in .*ENOENT/)
  })

  it('a child that exits at start rejects at stage initialize with its exit code and stderr', async () => {
    const s = await provider({ command: process.execPath, args: [fixture('exit-at-start.mjs')] })
    const { error, ms } = await failedStart(s)
    expect(error.code).toBe('START_FAILED')
    expect(error.message).toContain('stage initialize: it exited with code 7')
    expect(error.message).toContain('cannot start: no configuration found')
    expect(ms).toBeLessThan(5000)
  })

  it('a child that prints garbage on stdout is rejected at once, not at the startup timeout', async () => {
    const s = await provider({ command: process.execPath, args: [fixture('garbage.mjs')], startupTimeoutMs: 20_000, stdinGraceMs: 100, termGraceMs: 100 })
    const { error, ms } = await failedStart(s)
    expect(error.code).toBe('START_FAILED')
    expect(error.message).toContain('stage initialize: it wrote something other than ACP frames to stdout: "Welcome to SuperTool 3000!')
    expect(ms).toBeLessThan(5000)
  })

  it('a child that never answers initialize is rejected after startupTimeoutMs and killed', async () => {
    const s = await provider({ command: process.execPath, args: [fixture('never-answer.mjs')], startupTimeoutMs: 500, stdinGraceMs: 100, termGraceMs: 100 })
    const { error, ms } = await failedStart(s)
    expect(error.code).toBe('START_FAILED')
    expect(error.message).toContain('stage initialize: it did not finish initialize within startupTimeoutMs (500 ms)')
    expect(ms).toBeGreaterThanOrEqual(500)
    expect(ms).toBeLessThan(5000)
  })

  it('a pre-aborted signal rejects ABORTED without spawning anything', async () => {
    // A command that cannot run would reject START_FAILED if anything were spawned.
    const s = await provider({ command: 'dsh-no-such-program-anywhere' })
    const controller = new AbortController()
    controller.abort()
    const { error } = await failedStart(s, controller.signal)
    expect(error.code).toBe('ABORTED')
  })

  it('aborting the signal while the agent starts rejects ABORTED after reaping it', async () => {
    const s = await provider({ command: process.execPath, args: [fixture('never-answer.mjs')], stdinGraceMs: 100, termGraceMs: 100 })
    const controller = new AbortController()
    setTimeout(() => controller.abort(), 300)
    const { error } = await failedStart(s, controller.signal)
    expect(error.code).toBe('ABORTED')
    expect(error.message).toContain('stage initialize')
  })

  it('an unreachable cwd rejects at stage spawn', async () => {
    const s = await provider({ command: process.execPath, args: [fixture('agent.mjs')], cwd: '/nonexistent/dsh-acp' })
    const { error } = await failedStart(s)
    expect(error.message).toMatch(/stage spawn: .* in \/nonexistent\/dsh-acp/)
  })
})

describe('acp: config is validated at load, naming the key', () => {
  it.each([
    [{}, 'command'],
    [{ command: 'x', permission: 'maybe' }, 'permission'],
    [{ command: 'x', env: { A: 1 } }, 'env.A'],
    [{ command: 'x', timeoutMs: -5 }, 'timeoutMs'],
    [{ command: 'x', args: 'acp' }, 'args'],
    [{ command: 'x', env: { 'A=B': '1' } }, 'env'],
    [{ command: 'x', cwd: '' }, 'cwd'],
  ])('%j fails on %s', async (config, key) => {
    await expect(setup(config as { command: string })).rejects.toThrow(key)
  })

  it('registers under providerName (default acp)', async () => {
    current = await setup({ command: 'x', providerName: 'dsh-child' })
    expect(current.harness.ctx.subagents.list()).toEqual(['dsh-child'])
  })
})

describe('acp: a child closed while it opens', () => {
  it('connects nothing and fails its start naming the close, with the process reaped (the SDK may still be loading then)', async () => {
    const before = liveChildren()
    // An agent that would wait for frames for ever: only the close can end it.
    const spec = resolveAcpSpec(AcpProviderConfig({ providerName: 'acp', command: process.execPath, args: ['-e', 'process.stdin.resume()'], sharedWorkspace: true, stdinGraceMs: 2_000, termGraceMs: 2_000 }))
    const child = new AcpChild(spec, process.cwd())
    let stage = 'spawn'
    const control = { get stage() { return stage }, moveTo: (next: string) => (stage = next), failStartup: () => {}, withStderr: (message: string) => message }
    const opened = child.open(control, { kind: 'new', request: { cwd: process.cwd(), mcpServers: [] }, continuable: false })
    // In the same turn as the open: before the spawn is confirmed and the SDK is loaded.
    const closed = child.close()
    const error = await opened.then(() => undefined, (rejection: unknown) => rejection)
    await closed
    expect(error).toBeInstanceOf(SubagentError)
    expect((error as SubagentError).message).toContain('could not be started at stage spawn: it was closed while it started')
    expect(stage).toBe('spawn')
    expect(liveChildren()).toEqual(before)
  })
})
