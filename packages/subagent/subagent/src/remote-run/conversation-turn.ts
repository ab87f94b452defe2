/**
 * The turn lifecycle every continuable remote conversation shares (an ACP session, a Codex
 * thread), written once. A transport supplies its wire: how to start its process again and
 * reopen the conversation, how one turn delivers its message and reads the answer, how to
 * ask a turn to stop, and how it words a timeout or a lost process. The core owns the rest:
 *
 *   send ──the child is gone?──▶ restart it ──▶ deliver ──first outcome──▶ settled
 *     cancel  ─▶ interrupt ─▶ confirmed by the wire, or the grace period ends: aborted, child stopped
 *     timeout ─▶ interrupt, error at once, child stopped
 *     the process exits ─▶ a short drain for frames already written, then error
 *
 * One turn at a time; settling is first-wins and clears the turn's timers; progress is
 * passed on only until the turn settles; a child that cannot be trusted with the next turn
 * is stopped, and the next message starts it again; `dispose` runs once.
 *
 * A turn never rejects for the child's sake: every failure resolves `error` with a
 * diagnostic, a cancelled turn resolves `aborted`.
 */
import { errorMessage } from '@dsh/base'
import type { TextBlock } from '@dsh/llm'
import { SubagentError } from '../errors.js'
import type { ProgressSink, StopReason, SubagentProgress, SubagentResult } from '../types.js'
import { EXIT_DRAIN_MS, type ProgressReporter } from './remote-run.js'

/** A process that outlives a turn: the conversation's child while it lives. */
export interface ConversationChild {
  readonly tree: { readonly pid: number | undefined; readonly exited: Promise<unknown> }
  /** Whether the process is still there and its wire sound (a zombie does not count). */
  running(): Promise<boolean>
  /** Stop the process tree; idempotent; rejects only when something outlived SIGKILL. */
  close(): Promise<void>
}

/** What a turn's wire sees of its turn. */
export interface ConversationTurnControl<Child> extends ProgressReporter {
  readonly settled: boolean
  /** Set once the turn was asked to stop. */
  readonly cancelled: boolean
  /** First outcome wins. */
  settle(stopReason: StopReason, diagnostic?: string): void
  /** Settle `error` and stop `child`: it cannot be trusted with the next turn. */
  fail(diagnostic: string, child: Child): void
}

/** One turn's wire. */
export interface ConversationTurn<Child> {
  /**
   * Send the message on `child` and read the turn until it settles; resolve once there is
   * nothing more to send (the outcome may arrive later, through `settle`). A rejection
   * settles the turn `error` with its message.
   */
  deliver(child: Child): Promise<void>
  /** Ask the child to stop this turn (best effort: the grace period decides). */
  interrupt(child: Child): void
  /** The turn's result: the wire's output so far with the core's stop reason and diagnostic. */
  result(stopReason: StopReason, diagnostic: string | undefined): SubagentResult
  /** The turn settled: stop routing the child's messages to it. */
  detach?(child: Child): void
}

export interface ConversationTransport<Child extends ConversationChild> {
  /** How messages name the conversation: "ACP session <id>", "Codex thread <id>". */
  readonly conversationName: string
  /** How messages name the child: "the ACP agent", "the codex app-server". */
  readonly childName: string
  /** The wire's stop request, as messages name it: "session/cancel", "turn/interrupt". */
  readonly interruptName: string
  readonly cancelGraceMs: number
  /** The config key behind `cancelGraceMs`, named in its message. */
  readonly cancelGraceKey: string
  readonly timeoutMs: number | undefined
  /** A fresh process with the conversation reopened; rejects with a readable reason, leaving nothing running. */
  restart(signal: AbortSignal): Promise<Child>
  /** Why `message` cannot be sent at all (checked before any child is touched), or `undefined`. */
  refuse?(message: TextBlock[]): string | undefined
  openTurn(message: TextBlock[], control: ConversationTurnControl<Child>): ConversationTurn<Child>
  /** The diagnostic of a turn that ran past `timeoutMs`. */
  timedOut(limitMs: number): string
  /** The diagnostic of a turn whose process ended under it. */
  lost(child: Child): string
}

/** The conversation side of a `RemoteConversation`: send, cancel and dispose over one transport. */
export class ConversationCore<Child extends ConversationChild> {
  private child: Child | undefined
  private turn: TurnRun<Child> | undefined
  private disposal: Promise<void> | undefined

  constructor(
    private readonly transport: ConversationTransport<Child>,
    child: Child | undefined,
  ) {
    this.child = child
  }

  get pid(): number | undefined {
    return this.child?.tree.pid
  }

  /** Start the process and reopen the conversation now (a resume), rather than at the next message. */
  async reconnect(signal: AbortSignal): Promise<void> {
    this.child = await this.transport.restart(signal)
  }

  send(message: TextBlock[], progress?: ProgressSink): Promise<SubagentResult> {
    const { conversationName } = this.transport
    if (this.disposal) return Promise.resolve({ output: [], stopReason: 'error', diagnostic: `the conversation with ${conversationName} was closed; it takes no more messages` })
    if (this.turn) return Promise.reject(new SubagentError('INVALID_REQUEST', `a turn of ${conversationName} is still running; send the next message after it settles`))
    const turn = new TurnRun(this.transport, this.hold, progress)
    this.turn = turn
    void turn.run(message)
    void turn.done.then(() => {
      if (this.turn === turn) this.turn = undefined
    })
    return turn.done
  }

  cancel(reason?: unknown): void {
    this.turn?.cancel(reason)
  }

  dispose(): Promise<void> {
    this.disposal ??= (async () => {
      const turn = this.turn
      turn?.cancel('the conversation was closed')
      await turn?.done
      const child = this.child
      this.child = undefined
      await child?.close()
    })()
    return this.disposal
  }

  /** What a turn may do with the conversation's child. */
  private readonly hold: ChildHold<Child> = {
    current: () => this.child,
    adopt: (child) => {
      this.child = child
    },
    disposed: () => this.disposal !== undefined,
    abandon: (child) => {
      if (this.child === child) this.child = undefined
      child.close().catch(() => {
        // It outlived SIGKILL; dispose() of a later child cannot reach it either. Nothing to retry here.
      })
    },
  }
}

interface ChildHold<Child> {
  current(): Child | undefined
  adopt(child: Child): void
  disposed(): boolean
  /** The process cannot be trusted with the next turn: stop it; the next message starts it again. */
  abandon(child: Child): void
}

class TurnRun<Child extends ConversationChild> implements ConversationTurnControl<Child> {
  settled = false
  cancelled = false
  private current: Child | undefined
  private wire: ConversationTurn<Child> | undefined
  private readonly startup = new AbortController()
  private readonly timers = new Set<NodeJS.Timeout>()
  private resolveDone!: (result: SubagentResult) => void
  readonly done = new Promise<SubagentResult>((resolve) => (this.resolveDone = resolve))

  constructor(
    private readonly transport: ConversationTransport<Child>,
    private readonly hold: ChildHold<Child>,
    private readonly progress: ProgressSink | undefined,
  ) {}

  get reporting(): boolean {
    return this.progress !== undefined && !this.settled
  }

  report(update: SubagentProgress): void {
    if (!this.settled) this.progress?.report(update)
  }

  async run(message: TextBlock[]): Promise<void> {
    const { transport, hold } = this
    // A message the child would refuse is not sent: the turn ends error, the child untouched.
    const refusal = transport.refuse?.(message)
    if (refusal !== undefined) return this.settle('error', refusal)
    const wire = transport.openTurn(message, this)
    this.wire = wire
    let child = hold.current()
    if (!child || !(await child.running())) {
      if (child) hold.abandon(child)
      try {
        child = await transport.restart(this.startup.signal)
      } catch (error) {
        if (this.cancelled) return this.settle('aborted', `the turn was cancelled while ${transport.childName} was starting again`)
        return this.settle('error', `${transport.childName} could not be started again to continue ${transport.conversationName}: ${errorMessage(error)}`)
      }
      if (hold.disposed() || this.cancelled) {
        await child.close().catch(() => {
          // Reaping failed; nothing more can be done for a process we never used.
        })
        return this.settle('aborted', `the turn was cancelled while ${transport.childName} was starting again`)
      }
      hold.adopt(child)
    }
    this.current = child
    // Cancelled while the child was being checked: nothing was sent, so nothing needs stopping.
    if (this.cancelled) return this.settle('aborted', 'the turn was cancelled')
    this.watch(child, wire)
    try {
      await wire.deliver(child)
    } catch (error) {
      this.settle('error', errorMessage(error))
    }
  }

  /** The turn's limits: `timeoutMs`, and the process exiting under it. */
  private watch(child: Child, wire: ConversationTurn<Child>): void {
    const { transport } = this
    if (transport.timeoutMs !== undefined) {
      const limit = transport.timeoutMs
      this.later(limit, () => {
        wire.interrupt(child)
        this.fail(transport.timedOut(limit), child)
      })
    }
    void child.tree.exited.then(async () => {
      await new Promise((resolve) => setTimeout(resolve, EXIT_DRAIN_MS))
      if (this.settled) return
      if (this.cancelled) this.settle('aborted', 'the turn was cancelled')
      else this.settle('error', transport.lost(child))
      this.hold.abandon(child)
    })
  }

  cancel(reason?: unknown): void {
    if (this.settled || this.cancelled) return
    this.cancelled = true
    this.startup.abort(reason)
    const { current: child, wire, transport } = this
    if (!child || !wire) return
    wire.interrupt(child)
    this.later(transport.cancelGraceMs, () => {
      this.settle(
        'aborted',
        `the turn was cancelled: ${transport.childName} did not confirm ${transport.interruptName} within ${transport.cancelGraceKey} (${transport.cancelGraceMs} ms); it was stopped, and the next message starts it again`,
      )
      this.hold.abandon(child)
    })
  }

  settle(stopReason: StopReason, diagnostic?: string): void {
    if (this.settled) return
    this.settled = true
    for (const timer of this.timers) clearTimeout(timer)
    this.timers.clear()
    if (this.current) this.wire?.detach?.(this.current)
    const result = this.wire ? this.wire.result(stopReason, diagnostic) : { output: [], stopReason, ...(diagnostic !== undefined && { diagnostic }) }
    this.resolveDone(result)
  }

  fail(diagnostic: string, child: Child): void {
    this.settle('error', diagnostic)
    this.hold.abandon(child)
  }

  private later(ms: number, action: () => void): void {
    const timer = setTimeout(() => {
      this.timers.delete(timer)
      action()
    }, ms)
    this.timers.add(timer)
  }
}
