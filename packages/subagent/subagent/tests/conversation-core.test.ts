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
  type ConversationChild,
  type ConversationTransport,
  type ConversationTurn,
  type ConversationTurnControl,
  type SubagentProgress,
  type StopReason,
  type SubagentResult,
} from '@dsh/subagent'

/** An idle child process: it does nothing until it is closed. */
class IdleChild implements ConversationChild {
  readonly process: ChildProcess
  readonly tree: { pid: number | undefined; exited: Promise<unknown> }
  gone = false

  constructor() {
    this.process = spawn(process.execPath, ['-e', 'setInterval(() => {}, 1000)'], { stdio: 'ignore' })
    const exited = new Promise<unknown>((resolve) =>
      this.process.once('exit', (code, signal) => {
        this.gone = true
        resolve({ code, signal })
      }),
    )
    this.tree = { pid: this.process.pid, exited }
  }

  async running(): Promise<boolean> {
    return !this.gone
  }

  async close(): Promise<void> {
    if (!this.gone) this.process.kill('SIGKILL')
    await this.tree.exited
  }
}

/** What a test's turn does once delivered: it gets the control and the child. */
type Script = (control: ConversationTurnControl<IdleChild>, child: IdleChild) => void | Promise<void>

class TestTransport implements ConversationTransport<IdleChild> {
  readonly conversationName = 'test conversation c1'
  readonly childName = 'the test child'
  readonly interruptName = 'stop'
  readonly cancelGraceKey = 'graceMs'
  readonly cancelGraceMs = 100
  readonly started: IdleChild[] = []
  readonly interrupts: IdleChild[] = []
  script: Script = () => {}

  constructor(readonly timeoutMs?: number) {}

  async restart(): Promise<IdleChild> {
    const child = new IdleChild()
    this.started.push(child)
    return child
  }

  openTurn(_message: TextBlock[], control: ConversationTurnControl<IdleChild>): ConversationTurn<IdleChild> {
    const script = this.script
    return {
      deliver: async (child) => script(control, child),
      interrupt: (child) => void this.interrupts.push(child),
      result: (stopReason: StopReason, diagnostic: string | undefined): SubagentResult => ({ output: [text('partial')], stopReason, ...(diagnostic !== undefined && { diagnostic }) }),
    }
  }

  timedOut(limitMs: number): string {
    return `the test child ran past ${limitMs} ms`
  }

  lost(): string {
    return 'the test child went away'
  }
}

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
    let late: ConversationTurnControl<IdleChild> | undefined
    transport.script = (control) => {
      control.report({ kind: 'text', text: 'working' })
      control.settle('completed')
      late = control
    }
    const heard: SubagentProgress[] = []
    const result = await conversation(transport).send([text('go')], { report: (update) => void heard.push(update) })
    expect(result).toEqual({ output: [text('partial')], stopReason: 'completed' })
    expect(late!.reporting).toBe(false)
    late!.report({ kind: 'text', text: 'too late' })
    late!.settle('error', 'too late')
    expect(heard).toEqual([{ kind: 'text', text: 'working' }])
  })

  it('a turn nobody listens to is told so: reporting is false and reports go nowhere', async () => {
    const transport = new TestTransport()
    let reporting: boolean | undefined
    transport.script = (control) => {
      reporting = control.reporting
      control.report({ kind: 'text', text: 'unheard' })
      control.settle('completed')
    }
    await conversation(transport).send([text('go')])
    expect(reporting).toBe(false)
  })

  it('one child serves turn after turn; a second send while a turn runs is refused, and a closed conversation takes no message', async () => {
    const transport = new TestTransport()
    let finish = () => {}
    transport.script = (control) => void (finish = () => control.settle('completed'))
    const core = conversation(transport)
    const first = core.send([text('one')])
    await until(() => transport.started.length === 1)
    await expect(core.send([text('two')])).rejects.toMatchObject({ code: 'INVALID_REQUEST', message: expect.stringContaining('a turn of test conversation c1 is still running') })
    finish()
    await first
    transport.script = (control) => control.settle('completed')
    await core.send([text('three')])
    expect(transport.started).toHaveLength(1)
    expect(core.pid).toBe(transport.started[0]!.tree.pid)
    await core.dispose()
    expect(transport.started[0]!.gone).toBe(true)
    expect(await core.send([text('four')])).toEqual({ output: [], stopReason: 'error', diagnostic: 'the conversation with test conversation c1 was closed; it takes no more messages' })
  })

  it('a cancel the child never confirms ends aborted after the grace period and stops the child; the next message starts a new one', async () => {
    const transport = new TestTransport()
    transport.script = () => {} // never answers
    const core = conversation(transport)
    const turn = core.send([text('slow')])
    await until(() => transport.started.length === 1)
    core.cancel('enough')
    expect(await turn).toMatchObject({ stopReason: 'aborted', diagnostic: 'the turn was cancelled: the test child did not confirm stop within graceMs (100 ms); it was stopped, and the next message starts it again' })
    expect(transport.interrupts).toEqual([transport.started[0]])
    await transport.started[0]!.tree.exited
    transport.script = (control) => control.settle('completed')
    expect((await core.send([text('again')])).stopReason).toBe('completed')
    expect(transport.started).toHaveLength(2)
  })

  it('the child exiting mid-turn ends it error in the transport\'s words; a timeout interrupts, fails and stops the child', async () => {
    const transport = new TestTransport()
    transport.script = (_control, child) => void child.process.kill('SIGKILL')
    const core = conversation(transport)
    expect(await core.send([text('crash')])).toMatchObject({ stopReason: 'error', diagnostic: 'the test child went away' })

    const slow = new TestTransport(50)
    slow.script = () => {}
    const timed = conversation(slow)
    expect(await timed.send([text('hang')])).toMatchObject({ stopReason: 'error', diagnostic: 'the test child ran past 50 ms' })
    expect(slow.interrupts).toHaveLength(1)
    await slow.started[0]!.tree.exited
  })

  it('a message the transport refuses ends the turn error before any child is started', async () => {
    const transport = Object.assign(new TestTransport(), { refuse: (message: TextBlock[]) => (message[0]!.text.length > 3 ? 'too long for the test child' : undefined) })
    expect(await conversation(transport).send([text('much too long')])).toEqual({ output: [], stopReason: 'error', diagnostic: 'too long for the test child' })
    expect(transport.started).toEqual([])
  })
})
