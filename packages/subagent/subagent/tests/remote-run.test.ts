/**
 * The out-of-process run core against a wire with no local process (the shape an A2A
 * provider will have): every lifecycle rule, without spawning anything.
 */
import { afterEach, describe, expect, it } from 'vitest'
import { createHarness, type Harness } from '@dsh/testkit/harness'
import { text } from '@dsh/llm'
import type { Agent } from '@dsh/agent'
import type { StopReason } from '@dsh/base'
import { startRemoteRun, SubagentError, type RemoteEnding, type RemoteRunControl, type RemoteRunOptions, type RemoteWire, type SubagentRequest, type SubagentResult } from '@dsh/subagent'

let harness: Harness | undefined
let parent: Agent
afterEach(async () => {
  await harness?.dispose()
  harness = undefined
})

async function setup(): Promise<void> {
  harness = await createHarness()
  parent = await harness.agent()
}

const request = (extra: Partial<SubagentRequest> = {}): SubagentRequest => ({ prompt: [text('go')], parent, signal: new AbortController().signal, ...extra })

const options = (extra: Partial<RemoteRunOptions> = {}): RemoteRunOptions => ({
  provider: 'remote',
  childName: 'the remote agent',
  initialStage: 'connect',
  startupTimeoutMs: 60_000,
  startupTimeoutKey: 'startupTimeoutMs',
  cancelGraceMs: 60_000,
  cancelGraceKey: 'cancelGraceMs',
  ...extra,
})

/** A wire whose every step the test drives by hand. */
class HandWire implements RemoteWire {
  opened!: { resolve(id: string): void; reject(error: unknown): void }
  interrupts = 0
  closes = 0
  endings: Array<RemoteEnding | undefined> = []
  readonly interrupt = { name: 'task/cancel', send: () => void this.interrupts++ }

  constructor(readonly run: RemoteRunControl) {}

  open(): Promise<string> {
    return new Promise((resolve, reject) => (this.opened = { resolve, reject }))
  }

  startFailed(message: string): SubagentError {
    return new SubagentError('START_FAILED', `the remote agent could not be started (stage ${this.run.stage}): ${message}`)
  }

  result(stopReason: StopReason, diagnostic: string | undefined, ending?: RemoteEnding): SubagentResult {
    this.endings.push(ending)
    return { output: [text('partial')], stopReason, ...(diagnostic !== undefined && { diagnostic }) }
  }

  async close(): Promise<void> {
    this.closes++
  }
}

async function started(extra: Partial<RemoteRunOptions> = {}, req = request()) {
  let wire!: HandWire
  const starting = startRemoteRun(req, options(extra), (run) => (wire = new HandWire(run)))
  await Promise.resolve()
  wire.opened.resolve('task-7')
  return { run: await starting, wire }
}

describe('remote run core', () => {
  it('publishes a handle with the one child-id format and no pid when there is no local process', async () => {
    await setup()
    const { run, wire } = await started()
    expect(run).toMatchObject({ id: 'remote:task-7', remoteId: 'task-7', local: false, pid: undefined })
    wire.run.settle({ output: [text('done')], stopReason: 'completed' })
    wire.run.settle({ output: [], stopReason: 'error', diagnostic: 'too late' })
    expect(await run.result).toEqual({ output: [text('done')], stopReason: 'completed' })
  })

  it('cancel sends the interrupt once and settles aborted when the grace period ends unconfirmed, naming the interrupt', async () => {
    await setup()
    const { run, wire } = await started({ cancelGraceMs: 20 })
    run.cancel('stop it')
    run.cancel('again')
    expect(wire.interrupts).toBe(1)
    expect(await run.result).toMatchObject({ stopReason: 'aborted', diagnostic: 'the run was cancelled: the remote agent did not confirm task/cancel within cancelGraceMs (20 ms)' })
    await run.dispose()
    expect(wire.closes).toBe(1)
  })

  it('a confirmed interrupt settles the run before the grace period, and dispose releases once', async () => {
    await setup()
    const { run, wire } = await started()
    run.cancel()
    expect(wire.run.stopping).toBe('cancelled')
    wire.run.settle(wire.result('aborted', 'confirmed'))
    expect(await run.result).toMatchObject({ stopReason: 'aborted', diagnostic: 'confirmed' })
    const first = run.dispose()
    expect(run.dispose()).toBe(first)
    await first
    expect(wire.closes).toBe(1)
  })

  it('timeoutMs settles error at once, interrupts the remote work and releases it without waiting for dispose', async () => {
    await setup()
    const { run, wire } = await started({ timeoutMs: 20 })
    const result = await run.result
    expect(result).toMatchObject({ stopReason: 'error', output: [text('partial')], diagnostic: 'the remote agent did not finish within timeoutMs (20 ms) (stage connect); it was stopped' })
    expect(wire.endings).toEqual(['timeout'])
    expect(wire.interrupts).toBe(1)
    expect(wire.closes).toBe(1)
  })

  it('the start-up timeout rejects START_FAILED naming the stage, after the wire is released', async () => {
    await setup()
    let wire!: HandWire
    const error = await startRemoteRun(request(), options({ startupTimeoutMs: 20 }), (run) => {
      wire = new HandWire(run)
      run.moveTo('handshake')
      return wire
    }).catch((caught: unknown) => caught)
    expect(error).toMatchObject({ code: 'START_FAILED', message: 'the remote agent could not be started (stage handshake): it did not finish handshake within startupTimeoutMs (20 ms)' })
    expect(wire.closes).toBe(1)
  })

  it('aborting the signal while starting rejects ABORTED after the wire is released', async () => {
    await setup()
    const controller = new AbortController()
    let wire!: HandWire
    const starting = startRemoteRun(request({ signal: controller.signal }), options(), (run) => (wire = new HandWire(run)))
    controller.abort()
    await expect(starting).rejects.toMatchObject({ code: 'ABORTED', message: expect.stringContaining('while the remote agent was starting (stage connect)') })
    expect(wire.closes).toBe(1)
  })

  it('a failure read in the same chunk as the last start-up reply ends the published run instead of the start', async () => {
    await setup()
    let wire!: HandWire
    const starting = startRemoteRun(request(), options(), (run) => (wire = new HandWire(run)))
    await Promise.resolve()
    wire.opened.resolve('task-8')
    wire.run.failStartup(wire.startFailed('garbage'), () => wire.run.fail('garbage after the reply'))
    const run = await starting
    expect(await run.result).toMatchObject({ stopReason: 'error', diagnostic: 'garbage after the reply' })
    expect(wire.closes).toBe(1)
  })

  it('a pre-aborted signal, a disposed parent and a depth beyond maxDepth create no wire', async () => {
    await setup()
    let made = 0
    const make = (run: RemoteRunControl) => (made++, new HandWire(run))
    const aborted = new AbortController()
    aborted.abort()
    await expect(startRemoteRun(request({ signal: aborted.signal }), options(), make)).rejects.toMatchObject({ code: 'ABORTED' })
    await expect(startRemoteRun(request({ maxDepth: 0 }), options(), make)).rejects.toMatchObject({ code: 'DEPTH_LIMIT' })
    await parent.dispose()
    await expect(startRemoteRun(request(), options(), make)).rejects.toMatchObject({ code: 'PARENT_DISPOSED' })
    expect(made).toBe(0)
  })
})
