/**
 * One turn of a remote child, the lifecycle every remote provider shares: a one-shot run
 * is a conversation of one such turn, a continuable child's conversation runs them one
 * after another. A provider's turn file (its `RemoteTurn`) delivers the message and reads
 * the answer; this file decides how the turn ends:
 *
 *   deliver ──accepted──▶ running ──first outcome──▶ settled
 *     cancel  ─▶ interrupt ─▶ confirmed by the wire, or the grace period ends: aborted, the child stopped
 *             (no interrupt: aborted at once, the child stopped)
 *     timeout ─▶ interrupt, error at once, the child stopped
 *     the process exits ─▶ a short drain for frames already written, then error (aborted if cancelled)
 *
 * Settling is first-wins and clears the turn's timers; progress is passed on only until
 * the turn settles. A child that cannot be trusted with another turn is stopped (a
 * continuable conversation starts it again for the next message). A turn never rejects for
 * the child's sake: every failure resolves `error` with a diagnostic.
 *
 * Before it is accepted a turn may be inside a start-up window (a one-shot run's, whose
 * failure rejects the start instead; a Claude Code turn's, which starts a process).
 */
import { errorMessage } from '@dsh/base'
import type { TextBlock } from '@dsh/llm'
import type { SubagentError } from '../errors.js'
import type { ProgressSink, StopReason, SubagentProgress, SubagentResult } from '../types.js'
import { StartupWindow, type LaunchWords, type StartControl } from './launch.js'
import { EXIT_DRAIN_MS, withStderr, type RemoteProcess } from './process.js'

/** Why the lifecycle ended a turn; a wire may word its result by it. */
export type RemoteEnding = 'cancelled' | 'timeout' | 'lost'

/** Where a wire reports its child's live progress. */
export interface ProgressReporter {
  /** Whether anybody hears this turn's progress: a wire builds no update when nobody does. */
  readonly reporting: boolean
  /** One piece of the child's live progress; dropped once the turn has settled (its last progress precedes its end). */
  report(update: SubagentProgress): void
}

/** What a turn's wire sees of its turn. */
export interface TurnControl extends ProgressReporter, StartControl {
  /** `run` for a one-shot run's turn, `turn` for a continuable conversation's: how diagnostics name it. */
  readonly scope: 'run' | 'turn'
  readonly settled: boolean
  /** Set once a cancel or a timeout asked the child to stop. */
  readonly stopping: RemoteEnding | undefined
  /**
   * The remote side took the work. `remoteId` names it when the child's own id does not
   * (an A2A task). A one-shot run is published here; an outcome the wire reports before
   * it accepts the turn accepts it first.
   */
  accepted(remoteId?: string): void
  /** First outcome wins. */
  settle(result: SubagentResult): void
  /** Settle `error` with `diagnostic` and stop the child: it cannot be trusted with another turn. */
  fail(diagnostic: string, ending?: RemoteEnding): void
  /** A timer cleared when the turn settles. */
  later(ms: number, action: () => void): void
}

/** A provider's turn file: one turn's wire. */
export interface RemoteTurn<Child> {
  /**
   * Send the message on `child` and read the turn until it settles; resolve once there is
   * nothing more to send (the outcome may come later, through `settle`). A rejection
   * settles the turn `error` with its message.
   */
  deliver(child: Child): Promise<void>
  /** Ask the child to stop this turn (best effort: the grace period decides). Without it a cancel ends the turn at once and stops the child. */
  interrupt?(child: Child): void
  /** The turn's result: the wire's output so far with the lifecycle's stop reason and diagnostic. */
  result(stopReason: StopReason, diagnostic: string | undefined, ending?: RemoteEnding): SubagentResult
  /** The turn settled: stop routing the child's messages to it. */
  detach?(child: Child): void
}

/** The child a turn runs on, as the lifecycle needs it. */
export interface TurnChild {
  readonly process?: RemoteProcess
}

/** A transport's limits and words for its turns. */
export interface TurnWords extends LaunchWords {
  /** The wire's stop request, as messages name it: "session/cancel", "turn/interrupt". */
  readonly interruptName?: string
  readonly cancelGraceMs: number
  /** The config key behind `cancelGraceMs`, named in its message. */
  readonly cancelGraceKey: string
  readonly timeoutMs: number | undefined
  /** `timeoutMs` bounds the whole run, its start included (Claude Code, A2A), not only the work after acceptance. */
  readonly timeoutIncludesStartup?: boolean
}

/** What a turn may do with its conversation's child. */
export interface ChildHold<Child> {
  /** The process cannot be trusted with the next turn: stop it (the next message starts it again); resolves once it is gone. */
  abandon(child: Child): Promise<void>
}

type Phase = 'delivering' | 'starting' | 'running' | 'settled'

export class TurnRun<Child extends TurnChild> implements TurnControl {
  stage: string
  stopping: RemoteEnding | undefined
  private phase: Phase = 'delivering'
  private child: Child | undefined
  private wire: RemoteTurn<Child> | undefined
  private window: StartupWindow | undefined
  private readonly timers = new Set<NodeJS.Timeout>()
  private afterAcceptance: Array<() => void> = []
  /** Aborted by a cancel that comes before the turn runs (while its child starts again). */
  private readonly startup = new AbortController()
  private resolveAccepted!: (remoteId: string | undefined) => void
  /** Resolves with the wire's remote id (if it named one) when the turn is accepted. */
  readonly acceptance = new Promise<string | undefined>((resolve) => (this.resolveAccepted = resolve))
  private resolveDone!: (result: SubagentResult) => void
  readonly done = new Promise<SubagentResult>((resolve) => (this.resolveDone = resolve))

  constructor(
    private readonly words: TurnWords,
    private readonly hold: ChildHold<Child>,
    private readonly progress: ProgressSink | undefined,
    /** `run` for a one-shot run, `turn` for a continuable conversation's (whose child the next message starts again). */
    readonly scope: 'run' | 'turn',
    stage: string,
    /** When the run began, for a timeout that includes the start. */
    private readonly startedAt = Date.now(),
  ) {
    this.stage = stage
  }

  get settled(): boolean {
    return this.phase === 'settled'
  }

  get reporting(): boolean {
    return this.progress !== undefined && !this.settled
  }

  report(update: SubagentProgress): void {
    if (!this.settled) this.progress?.report(update)
  }

  moveTo(stage: string): void {
    this.stage = stage
    this.window?.moveTo(stage)
  }

  withStderr(message: string): string {
    return withStderr(this.child?.process, message)
  }

  /** Aborted when the turn is cancelled before it runs: what a (re)start of its child races. */
  get startupSignal(): AbortSignal {
    return this.startup.signal
  }

  /** Cancelled before it ran (its child was starting again). */
  get cancelledEarly(): boolean {
    return this.startup.signal.aborted
  }

  /** The turn's wire, opened before its child is looked at (a refusal or a failed restart is worded by it). */
  open(wire: RemoteTurn<Child>): void {
    this.wire = wire
  }

  /** Settle with `stopReason` and `diagnostic` on whatever the wire has (nothing, if it was never opened). */
  end(stopReason: StopReason, diagnostic: string): void {
    this.settle(this.wire ? this.wire.result(stopReason, diagnostic) : { output: [], stopReason, diagnostic })
  }

  /**
   * Deliver on `child` through the opened wire. With `window`, the turn is starting until
   * it is accepted: `window`'s failures are the caller's (a one-shot run's start rejects),
   * and `begin` ends the start; without it the turn runs at once.
   */
  deliver(child: Child, window?: StartupWindow): void {
    const wire = this.wire!
    this.child = child
    this.window = window
    // From here the start's messages name the turn's stage.
    window?.moveTo(this.stage)
    this.phase = window === undefined ? 'running' : 'starting'
    this.watchExit(child)
    if (window === undefined || this.words.timeoutIncludesStartup) this.startTimeout()
    wire.deliver(child).catch((error: unknown) => this.settle(wire.result('error', errorMessage(error))))
  }

  /** The start is over (the window won): run what waited for acceptance. */
  begin(): void {
    if (this.phase !== 'starting') return
    this.phase = 'running'
    const window = this.window!
    this.window = undefined
    if (!this.words.timeoutIncludesStartup) this.startTimeout()
    window.close(true)
    for (const after of this.afterAcceptance.splice(0)) after()
  }

  /** The start failed (the window lost, and closed): the turn ends so, and what waited for acceptance is dropped. */
  abandonStart(stopReason: StopReason, diagnostic: string): void {
    if (this.phase !== 'starting') return
    this.window = undefined
    this.afterAcceptance = []
    this.phase = 'running'
    this.end(stopReason, diagnostic)
  }

  accepted(remoteId?: string): void {
    this.resolveAccepted(remoteId)
  }

  failStartup(error: SubagentError, ifStarted?: () => void): void {
    if (this.phase === 'starting') return this.window!.failStartup(error, ifStarted)
    if (this.phase === 'running') (ifStarted ?? (() => this.fail(error.message)))()
  }

  /** First outcome wins; with `after`, the turn's result is handed out once that has settled too. */
  settle(result: SubagentResult, after?: Promise<unknown>): void {
    // An outcome read while the start is still resolving belongs to the turn it becomes.
    if (this.phase === 'starting') {
      this.accepted()
      return void this.afterAcceptance.push(() => this.settle(result, after))
    }
    if (this.phase === 'settled') return
    this.phase = 'settled'
    this.clearTimers()
    if (this.child) this.wire?.detach?.(this.child)
    if (after === undefined) return this.resolveDone(result)
    void after.then(
      () => this.resolveDone(result),
      () => this.resolveDone(result),
    )
  }

  fail(diagnostic: string, ending?: RemoteEnding): void {
    if (this.phase === 'starting') {
      this.accepted()
      return void this.afterAcceptance.push(() => this.fail(diagnostic, ending))
    }
    if (this.settled) return
    this.settle(this.wire!.result('error', diagnostic, ending))
    if (this.child) void this.hold.abandon(this.child)
  }

  cancel(reason?: unknown): void {
    if (this.stopping || this.settled) return
    if (this.phase !== 'running') {
      // Not running yet: what is starting (a child started again, a Claude Code process) is aborted.
      this.stopping = 'cancelled'
      return this.startup.abort(reason)
    }
    this.stopping = 'cancelled'
    const wire = this.wire!
    const child = this.child!
    const { words } = this
    if (!wire.interrupt) {
      // Nothing to ask: the child is stopped. A conversation's turn answers once it is gone,
      // so the next message never meets the process of the last.
      const detail = reason === undefined ? '' : `: ${errorMessage(reason)}`
      const gone = this.hold.abandon(child)
      return this.settle(wire.result('aborted', `the ${this.scope} was cancelled${detail}`, 'cancelled'), this.scope === 'turn' ? gone : undefined)
    }
    wire.interrupt(child)
    this.later(words.cancelGraceMs, () => {
      const again = this.scope === 'turn' ? '; it was stopped, and the next message starts it again' : ''
      this.settle(wire.result('aborted', `the ${this.scope} was cancelled: ${words.childName} did not confirm ${words.interruptName} within ${words.cancelGraceKey} (${words.cancelGraceMs} ms)${again}`, 'cancelled'))
      void this.hold.abandon(child)
    })
  }

  later(ms: number, action: () => void): void {
    const timer = setTimeout(() => {
      this.timers.delete(timer)
      action()
    }, ms)
    this.timers.add(timer)
  }

  /** `timeoutMs` from now (or from the run's start when it includes it). */
  private startTimeout(): void {
    const { timeoutMs } = this.words
    if (timeoutMs === undefined) return
    const left = this.words.timeoutIncludesStartup ? Math.max(0, this.startedAt + timeoutMs - Date.now()) : timeoutMs
    this.later(left, () => {
      if (this.phase === 'starting') return
      this.stopping = 'timeout'
      this.wire!.interrupt?.(this.child!)
      this.fail(`${this.words.childName} did not finish within timeoutMs (${timeoutMs} ms) (stage ${this.stage}); it was stopped${this.scope === 'turn' ? ', and the next message starts it again' : ''}`, 'timeout')
    })
  }

  /** The process exiting under the turn: once the frames it wrote have drained, the exit decides (a start's window handles its own). */
  private watchExit(child: Child): void {
    const process = child.process
    if (process === undefined) return
    void process.exited().then(async () => {
      await new Promise((resolve) => setTimeout(resolve, EXIT_DRAIN_MS))
      if (this.phase !== 'running') return
      if (this.stopping === 'cancelled') {
        this.settle(this.wire!.result('aborted', `the ${this.scope} was cancelled`, 'cancelled'))
        return void this.hold.abandon(child)
      }
      const again = this.scope === 'turn' ? '; the next message starts it again' : ''
      this.fail(this.withStderr(`${this.words.childName} ${process.howItEnded()} during ${this.stage}${again}`), 'lost')
    })
  }

  private clearTimers(): void {
    for (const timer of this.timers) clearTimeout(timer)
    this.timers.clear()
  }
}

/** A message's text blocks, as a transport's `refuse` and `openTurn` see it. */
export type TurnMessage = TextBlock[]
