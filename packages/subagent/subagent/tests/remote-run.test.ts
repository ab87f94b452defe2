/**
 * A one-shot remote run (a conversation of one turn) against a transport with no local
 * process, the shape the A2A provider has: every rule of the start and of the run, driven
 * by hand, without spawning anything.
 */
import { afterEach, describe, expect, it } from 'vitest'
import { createHarness, type Harness } from '@dsh/testkit/harness'
import { text, type TextBlock } from '@dsh/llm'
import type { Agent } from '@dsh/agent'
import type { StopReason } from '@dsh/base'
import { startRemoteRun, SubagentError, type RemoteChild, type RemoteConnection, type RemoteEnding, type RemoteTransport, type RemoteTurn, type StartControl, type SubagentRequest, type SubagentResult, type TurnControl } from '@dsh/subagent'

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

class HandChild implements RemoteChild {
  closes = 0
  async running(): Promise<boolean> {
    return this.closes === 0
  }
  async close(): Promise<void> {
    this.closes++
  }
}

/** A transport whose every step the test drives by hand. */
class HandTransport implements RemoteTransport<HandChild> {
  readonly provider = 'remote'
  readonly childName = 'the remote agent'
  readonly interruptName = 'task/cancel'
  readonly cancelGraceKey = 'cancelGraceMs'
  readonly startupTimeoutKey = 'startupTimeoutMs'
  readonly initialStage = 'connect'
  readonly turnStage = 'work'
  readonly conversationName = 'the remote task'
  startupTimeoutMs = 60_000
  cancelGraceMs = 60_000
  timeoutMs: number | undefined
  timeoutIncludesStartup: boolean | undefined
  connects = 0
  child: HandChild | undefined
  opened!: { resolve(): void; reject(error: unknown): void }
  /** What a connection does as it starts (before the test resolves it). */
  onConnect: (control: StartControl) => void = () => {}
  control: TurnControl | undefined
  interrupts = 0
  endings: Array<RemoteEnding | undefined> = []
  delivered = false

  constructor(extra: Partial<HandTransport> = {}) {
    Object.assign(this, extra)
  }

  connect(control: StartControl): RemoteConnection<HandChild> {
    this.connects++
    this.child = new HandChild()
    this.onConnect(control)
    return { child: this.child, opened: new Promise<void>((resolve, reject) => (this.opened = { resolve, reject })) }
  }

  openTurn(_message: TextBlock[], control: TurnControl): RemoteTurn<HandChild> {
    this.control = control
    return {
      deliver: async () => void (this.delivered = true),
      interrupt: () => void this.interrupts++,
      result: (stopReason: StopReason, diagnostic: string | undefined, ending?: RemoteEnding): SubagentResult => {
        this.endings.push(ending)
        return { output: [text('partial')], stopReason, ...(diagnostic !== undefined && { diagnostic }) }
      },
    }
  }

  startFailed(message: string, stage: string): SubagentError {
    return new SubagentError('START_FAILED', `the remote agent could not be started (stage ${stage}): ${message}`)
  }
}

/** Let what the start awaits settle (the connection, the turn's delivery). */
const ticks = async () => {
  for (let i = 0; i < 5; i++) await Promise.resolve()
}

async function started(transport = new HandTransport(), req = request()) {
  const starting = startRemoteRun(req, transport)
  await ticks()
  transport.opened.resolve()
  await ticks()
  transport.control!.accepted('task-7')
  return { run: await starting, transport, control: transport.control! }
}

describe('one-shot remote run', () => {
  it('publishes at acceptance a handle with the one child-id format and no pid when there is no local process; the first outcome wins', async () => {
    await setup()
    const { run, control } = await started()
    expect(run).toMatchObject({ id: 'remote:task-7', remoteId: 'task-7', local: false, pid: undefined })
    control.settle({ output: [text('done')], stopReason: 'completed' })
    control.settle({ output: [], stopReason: 'error', diagnostic: 'too late' })
    expect(await run.result).toEqual({ output: [text('done')], stopReason: 'completed' })
  })

  it('cancel sends the interrupt once and settles aborted when the grace period ends unconfirmed, naming the interrupt', async () => {
    await setup()
    const { run, transport } = await started(new HandTransport({ cancelGraceMs: 20 }))
    run.cancel('stop it')
    run.cancel('again')
    expect(transport.interrupts).toBe(1)
    expect(await run.result).toMatchObject({ stopReason: 'aborted', diagnostic: 'the run was cancelled: the remote agent did not confirm task/cancel within cancelGraceMs (20 ms)' })
    await run.dispose()
    expect(transport.child!.closes).toBe(1)
  })

  it('a confirmed interrupt settles the run before the grace period, and dispose closes the child once', async () => {
    await setup()
    const { run, transport, control } = await started()
    run.cancel()
    expect(control.stopping).toBe('cancelled')
    control.settle({ output: [], stopReason: 'aborted', diagnostic: 'confirmed' })
    expect(await run.result).toMatchObject({ stopReason: 'aborted', diagnostic: 'confirmed' })
    const first = run.dispose()
    expect(run.dispose()).toBe(first)
    await first
    expect(transport.child!.closes).toBe(1)
  })

  it('timeoutMs settles error at once, interrupts the remote work and closes the child without waiting for dispose', async () => {
    await setup()
    const { run, transport } = await started(new HandTransport({ timeoutMs: 20 }))
    const result = await run.result
    expect(result).toMatchObject({ stopReason: 'error', output: [text('partial')], diagnostic: 'the remote agent did not finish within timeoutMs (20 ms) (stage work); it was stopped' })
    expect(transport.endings).toEqual(['timeout'])
    expect(transport.interrupts).toBe(1)
    expect(transport.child!.closes).toBe(1)
  })

  it('the start-up timeout rejects START_FAILED naming the stage, after the child is closed', async () => {
    await setup()
    const transport = new HandTransport({ startupTimeoutMs: 20, onConnect: (control) => control.moveTo('handshake') })
    const error = await startRemoteRun(request(), transport).catch((caught: unknown) => caught)
    expect(error).toMatchObject({ code: 'START_FAILED', message: 'the remote agent could not be started (stage handshake): it did not finish handshake within startupTimeoutMs (20 ms)' })
    expect(transport.child!.closes).toBe(1)
  })

  it('with timeoutIncludesStartup a tighter timeoutMs bounds the start, named as timeoutMs', async () => {
    await setup()
    const transport = new HandTransport({ timeoutMs: 20, timeoutIncludesStartup: true })
    const error = await startRemoteRun(request(), transport).catch((caught: unknown) => caught)
    expect(error).toMatchObject({ code: 'START_FAILED', message: 'the remote agent could not be started (stage connect): it did not finish connect within timeoutMs (20 ms)' })
    expect(transport.child!.closes).toBe(1)
  })

  it('the start window spans the turn until it is accepted: aborting the signal then rejects ABORTED, after the child is closed', async () => {
    await setup()
    const controller = new AbortController()
    const transport = new HandTransport()
    const starting = startRemoteRun(request({ signal: controller.signal }), transport)
    await ticks()
    transport.opened.resolve()
    await ticks()
    expect(transport.delivered).toBe(true)
    controller.abort()
    await expect(starting).rejects.toMatchObject({ code: 'ABORTED', message: expect.stringContaining('while the remote agent was starting (stage work)') })
    expect(transport.child!.closes).toBe(1)
  })

  it('a wire failure before acceptance rejects the start in its own words, after the child is closed', async () => {
    await setup()
    const transport = new HandTransport()
    const starting = startRemoteRun(request(), transport)
    await ticks()
    transport.opened.resolve()
    await ticks()
    transport.control!.failStartup(new SubagentError('START_FAILED', 'the remote agent refused the work'))
    await expect(starting).rejects.toMatchObject({ code: 'START_FAILED', message: 'the remote agent refused the work' })
    expect(transport.child!.closes).toBe(1)
  })

  it('a failure read in the same chunk as the acceptance ends the published run instead of the start', async () => {
    await setup()
    const transport = new HandTransport()
    const starting = startRemoteRun(request(), transport)
    await ticks()
    transport.opened.resolve()
    await ticks()
    const control = transport.control!
    control.failStartup(transport.startFailed('garbage', control.stage), () => control.fail('garbage after the reply'))
    control.accepted('task-8')
    const run = await starting
    expect(run.id).toBe('remote:task-8')
    expect(await run.result).toMatchObject({ stopReason: 'error', diagnostic: 'garbage after the reply' })
    expect(transport.child!.closes).toBe(1)
  })

  it('a pre-aborted signal, a disposed parent and a depth beyond maxDepth connect nothing', async () => {
    await setup()
    const transport = new HandTransport()
    const aborted = new AbortController()
    aborted.abort()
    await expect(startRemoteRun(request({ signal: aborted.signal }), transport)).rejects.toMatchObject({ code: 'ABORTED' })
    await expect(startRemoteRun(request({ maxDepth: 0 }), transport)).rejects.toMatchObject({ code: 'DEPTH_LIMIT' })
    await parent.dispose()
    await expect(startRemoteRun(request(), transport)).rejects.toMatchObject({ code: 'PARENT_DISPOSED' })
    expect(transport.connects).toBe(0)
  })
})
