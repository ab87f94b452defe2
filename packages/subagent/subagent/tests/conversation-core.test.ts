/**
 * The shared turn lifecycle of continuable remote conversations, over a small transport
 * whose child is a real process (an idle `node`): the wire of each test says what a turn
 * does, the core decides how it ends.
 */
import { spawn, type ChildProcess } from 'node:child_process'
import { afterEach, describe, expect, it } from 'vitest'
import { text, type TextBlock } from '@dsh/llm'
import {
  ConversationCore,
  SubagentError,
  type RemoteChild,
  type RemoteConnection,
  type RemoteProcess,
  type RemoteTransport,
  type RemoteTurn,
  type SubagentProgress,
  type StopReason,
  type SubagentResult,
  type TurnControl,
} from '@dsh/subagent'

/** An idle child process: it does nothing until it is closed. */
class IdleChild implements RemoteChild {
  readonly child: ChildProcess
  readonly process: RemoteProcess
  private readonly exited: Promise<unknown>
  gone = false

  constructor() {
    this.child = spawn(process.execPath, ['-e', 'setInterval(() => {}, 1000)'], { stdio: 'ignore' })
    this.exited = new Promise<unknown>((resolve) =>
      this.child.once('exit', (code, signal) => {
        this.gone = true
        resolve({ code, signal })
      }),
    )
    const { pid } = this.child
    this.process = { pid, exited: () => this.exited, stderr: () => '', howItEnded: () => 'went away' }
  }

  async running(): Promise<boolean> {
    return !this.gone
  }

  async close(): Promise<void> {
    if (!this.gone) this.child.kill('SIGKILL')
    await this.exited
  }
}

/** What a test's turn does once delivered: it gets the control and the child. */
type Script = (control: TurnControl, child: IdleChild) => void | Promise<void>

class TestTransport implements RemoteTransport<IdleChild> {
  readonly provider = 'test'
  readonly conversationName = 'test conversation c1'
  readonly childName = 'the test child'
  readonly interruptName = 'stop'
  readonly cancelGraceKey = 'graceMs'
  readonly cancelGraceMs = 100
  readonly startupTimeoutMs = 60_000
  readonly startupTimeoutKey = 'startupTimeoutMs'
  readonly initialStage = 'spawn'
  readonly turnStage = 'work'
  readonly started: IdleChild[] = []
  readonly interrupts: IdleChild[] = []
  /** Turns delivered to a child so far. */
  delivered = 0
  script: Script = () => {}

  constructor(readonly timeoutMs?: number) {}

  connect(): RemoteConnection<IdleChild> {
    const child = new IdleChild()
    this.started.push(child)
    return { child, opened: Promise.resolve() }
  }

  openTurn(_message: TextBlock[], control: TurnControl): RemoteTurn<IdleChild> {
    const script = this.script
    return {
      deliver: async (child) => {
        this.delivered++
        await script(control, child)
      },
      interrupt: (child) => void this.interrupts.push(child),
      result: (stopReason: StopReason, diagnostic: string | undefined): SubagentResult => ({ output: [text('partial')], stopReason, ...(diagnostic !== undefined && { diagnostic }) }),
    }
  }

  startFailed(message: string, stage: string): SubagentError {
    return new SubagentError('START_FAILED', `the test child could not be started (stage ${stage}): ${message}`)
  }
}

/** A turn's result as the test's wire would give it. */
const done = (stopReason: StopReason, diagnostic?: string): SubagentResult => ({ output: [text('partial')], stopReason, ...(diagnostic !== undefined && { diagnostic }) })

/** Resolves once `check` holds (the test's own timeout bounds it). */
async function until(check: () => boolean): Promise<void> {
  while (!check()) await new Promise((resolve) => setTimeout(resolve, 10))
}

const cores: ConversationCore<IdleChild>[] = []
afterEach(async () => {
  await Promise.all(cores.splice(0).map((core) => core.dispose()))
})

function conversation(transport: TestTransport): ConversationCore<IdleChild> {
  const core = new ConversationCore(transport, undefined)
  cores.push(core)
  return core
}

describe('ConversationCore: the turn lifecycle of continuable remote conversations', () => {
  it('a turn reports progress to its sink until it settles; what the child says later is dropped', async () => {
    const transport = new TestTransport()
    let late: TurnControl | undefined
    transport.script = (control) => {
      control.report({ kind: 'text', text: 'working' })
      control.settle(done('completed'))
      late = control
    }
    const heard: SubagentProgress[] = []
    const result = await conversation(transport).send([text('go')], { report: (update) => void heard.push(update) })
    expect(result).toEqual({ output: [text('partial')], stopReason: 'completed' })
    expect(late!.reporting).toBe(false)
    late!.report({ kind: 'text', text: 'too late' })
    late!.settle(done('error', 'too late'))
    expect(heard).toEqual([{ kind: 'text', text: 'working' }])
  })

  it('a turn nobody listens to is told so: reporting is false and reports go nowhere', async () => {
    const transport = new TestTransport()
    let reporting: boolean | undefined
    transport.script = (control) => {
      reporting = control.reporting
      control.report({ kind: 'text', text: 'unheard' })
      control.settle(done('completed'))
    }
    await conversation(transport).send([text('go')])
    expect(reporting).toBe(false)
  })

  it('one child serves turn after turn; a second send while a turn runs is refused, and a closed conversation takes no message', async () => {
    const transport = new TestTransport()
    let finish = () => {}
    transport.script = (control) => void (finish = () => control.settle(done('completed')))
    const core = conversation(transport)
    const first = core.send([text('one')])
    await until(() => transport.delivered === 1)
    await expect(core.send([text('two')])).rejects.toMatchObject({ code: 'INVALID_REQUEST', message: expect.stringContaining('a turn of test conversation c1 is still running') })
    finish()
    await first
    transport.script = (control) => control.settle(done('completed'))
    await core.send([text('three')])
    expect(transport.started).toHaveLength(1)
    expect(core.pid).toBe(transport.started[0]!.child.pid)
    await core.dispose()
    expect(transport.started[0]!.gone).toBe(true)
    expect(await core.send([text('four')])).toEqual({ output: [], stopReason: 'error', diagnostic: 'the conversation with test conversation c1 was closed; it takes no more messages' })
  })

  it('a cancel the child never confirms ends aborted after the grace period and stops the child; the next message starts a new one', async () => {
    const transport = new TestTransport()
    transport.script = () => {} // never answers
    const core = conversation(transport)
    const turn = core.send([text('slow')])
    await until(() => transport.delivered === 1)
    core.cancel('enough')
    expect(await turn).toMatchObject({ stopReason: 'aborted', diagnostic: 'the turn was cancelled: the test child did not confirm stop within graceMs (100 ms); it was stopped, and the next message starts it again' })
    expect(transport.interrupts).toEqual([transport.started[0]])
    await transport.started[0]!.process.exited()
    transport.script = (control) => control.settle(done('completed'))
    expect((await core.send([text('again')])).stopReason).toBe('completed')
    expect(transport.started).toHaveLength(2)
  })

  it('the child exiting mid-turn ends it error in the transport\'s words; a timeout interrupts, fails and stops the child', async () => {
    const transport = new TestTransport()
    transport.script = (_control, child) => void child.child.kill('SIGKILL')
    const core = conversation(transport)
    expect(await core.send([text('crash')])).toMatchObject({ stopReason: 'error', diagnostic: 'the test child went away during work; the next message starts it again' })

    const slow = new TestTransport(50)
    slow.script = () => {}
    const timed = conversation(slow)
    expect(await timed.send([text('hang')])).toMatchObject({ stopReason: 'error', diagnostic: 'the test child did not finish within timeoutMs (50 ms) (stage work); it was stopped, and the next message starts it again' })
    expect(slow.interrupts).toHaveLength(1)
    await slow.started[0]!.process.exited()
  })

  it('a message the transport refuses ends the turn error before any child is started', async () => {
    const transport = Object.assign(new TestTransport(), { refuse: (message: TextBlock[]) => (message[0]!.text.length > 3 ? 'too long for the test child' : undefined) })
    expect(await conversation(transport).send([text('much too long')])).toEqual({ output: [], stopReason: 'error', diagnostic: 'too long for the test child' })
    expect(transport.started).toEqual([])
  })
})
