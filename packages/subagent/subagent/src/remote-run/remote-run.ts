/**
 * The lifecycle every out-of-process child shares, written once. A transport (ACP,
 * Codex app-server, Claude Code, later A2A) plugs in its wire: how to open the child,
 * how to ask it to stop, how to release it, and what its results look like. The core
 * owns everything else:
 *
 *   starting ──open() resolves──▶ running ──first outcome──▶ settled
 *      │ timeout, signal, failStartup, the process exiting        ▲
 *      └──▶ release(), then `start` rejects                       │
 *   running: cancel ─▶ wire.interrupt ─▶ confirmed, or the grace period ends ─┘
 *            timeout ─▶ error at once; the wire is interrupted and released
 *            the process exits ─▶ a short drain for frames already written, then error
 *
 * Settling is first-wins; timers live in one set and are cleared on settle; `dispose`
 * and `release` run once. A local child process is optional (`process` hooks): a remote
 * service has no exit to watch and no stderr to quote.
 */
import { errorMessage } from '@dsh/base'
import { refuseDisposedParent, refuseUnstartable } from '../admission.js'
import { SubagentError } from '../errors.js'
import type { StopReason, SubagentProgress, SubagentRequest, SubagentResult, SubagentRun } from '../types.js'
import { quoteStderr } from './stderr.js'

/** The run handle of every out-of-process provider. */
export interface RemoteSubagentRun extends SubagentRun {
  readonly local: false
  /** The remote side's own id for the child (an ACP session id, a Codex thread id, a Claude Code session id). */
  readonly remoteId: string
  /** The child process's pid (also its process group id), when the transport runs one here. */
  readonly pid: number | undefined
}

/** The one child-id format of out-of-process runs: `<provider>:<remote id>`. */
export function remoteChildId(provider: string, remoteId: string): string {
  return `${provider}:${remoteId}`
}

/** A local child process behind the wire: watched for an early exit, quoted from its stderr. */
export interface RemoteProcessHooks {
  readonly pid: number | undefined
  /** Resolves once the process has exited (or failed to spawn). */
  exited(): Promise<unknown>
  /** The last of what it wrote to stderr. */
  stderr(): string
  /** How it ended, as a predicate: "exited with code 3", "was killed by SIGKILL". */
  howItEnded(): string
}

/** Why the core ended a run; a wire may word its result by it. */
export type RemoteEnding = 'cancelled' | 'timeout' | 'lost'

export interface RemoteWire {
  /** Everything up to publication (spawn, handshake, session); resolves with the remote id of the child. */
  open(): Promise<string>
  /** Publication happened: send the work or start reading. */
  begin?(): void
  /** Ask the remote side to stop its work. A wire without it is stopped at once on cancel. */
  readonly interrupt?: { readonly name: string; send(): void }
  /** A `START_FAILED` error in the wire's words (it may name the command and the stage). */
  startFailed(message: string): SubagentError
  /** A result with the wire's output so far (and whatever notes it keeps). */
  result(stopReason: StopReason, diagnostic: string | undefined, ending?: RemoteEnding): SubagentResult
  /** Release everything the wire holds (reap the process, close the connection). Called once. */
  close(): Promise<void>
}

export interface RemoteRunOptions {
  provider: string
  /** How messages name the child: "the ACP agent", "the codex app-server", "Claude Code". */
  childName: string
  /** Where a run starts; wires move it on with `stage`. */
  initialStage: string
  startupTimeoutMs: number
  /** The config key behind `startupTimeoutMs`, named in its message. */
  startupTimeoutKey: string
  timeoutMs?: number
  /** Count `timeoutMs` from the start instead of from publication. */
  timeoutIncludesStartup?: boolean
  cancelGraceMs: number
  cancelGraceKey: string
  process?: RemoteProcessHooks
}

/** After the process exits, how long frames it already wrote may take to arrive before the exit decides. */
export const EXIT_DRAIN_MS = 1000

type Phase = 'starting' | 'running' | 'settled'

/** Where a wire reports its child's live progress: a run, or a continuable conversation's turn. */
export interface ProgressReporter {
  /** Whether anybody hears this run's progress: a wire builds no update when nobody does. */
  readonly reporting: boolean
  /**
   * One piece of the child's live progress, mapped from the wire. Dropped once the run (or
   * turn) has settled, so its last progress precedes its end; a malformed update is the
   * sink's to drop.
   */
  report(update: SubagentProgress): void
}

/** What a wire sees of its run. */
export interface RemoteRunControl extends ProgressReporter {
  readonly request: SubagentRequest
  readonly stage: string
  /** Set once a cancel or a timeout asked the child to stop. */
  readonly stopping: RemoteEnding | undefined
  readonly settled: boolean
  /** Record where the run is; every message names it. */
  moveTo(stage: string): void
  /**
   * A failure while starting: `start` rejects with `error`. If the start wins anyway (the
   * failure arrived in the same chunk as the last start-up reply), `ifRunning` ends the
   * run instead, once it is published; after publication it runs at once.
   */
  failStartup(error: SubagentError, ifRunning: () => void): void
  /** First outcome wins; one that arrives before publication is applied right after it. */
  settle(result: SubagentResult): void
  /** Settle `error` with `diagnostic` and release the child: it cannot be trusted to finish. */
  fail(diagnostic: string, ending?: RemoteEnding): void
  /** `message` with the last of the child's stderr on one line, when there is any. */
  withStderr(message: string): string
  /** A timer cleared when the run settles. */
  later(ms: number, action: () => void): void
}

/**
 * Start an out-of-process child: admission checks first, then `makeWire` (nothing exists
 * before it is called), then the wire's `open` under the start-up race.
 */
export async function startRemoteRun(
  request: SubagentRequest,
  options: RemoteRunOptions,
  makeWire: (run: RemoteRunControl) => RemoteWire,
): Promise<RemoteSubagentRun> {
  refuseUnstartable(request, options.childName)
  const run = new RemoteRun(request, options)
  return run.start(makeWire(run))
}

class RemoteRun implements RemoteRunControl {
  stage: string
  stopping: RemoteEnding | undefined
  private phase: Phase = 'starting'
  private wire!: RemoteWire
  private readonly startedAt = Date.now()
  private readonly timers = new Set<NodeJS.Timeout>()
  private resolveResult!: (result: SubagentResult) => void
  readonly result = new Promise<SubagentResult>((resolve) => (this.resolveResult = resolve))
  private rejectStartup: ((error: SubagentError) => void) | undefined
  private afterPublication: Array<() => void> = []
  private detachSignal: () => void = () => {}
  private releasing: Promise<void> | undefined
  private disposal: Promise<void> | undefined

  constructor(
    readonly request: SubagentRequest,
    private readonly options: RemoteRunOptions,
  ) {
    this.stage = options.initialStage
  }

  get settled(): boolean {
    return this.phase === 'settled'
  }

  async start(wire: RemoteWire): Promise<RemoteSubagentRun> {
    this.wire = wire
    const remoteId = await this.open()
    this.publish()
    const { pid } = this.options.process ?? {}
    return {
      id: remoteChildId(this.options.provider, remoteId),
      remoteId,
      pid,
      local: false,
      result: this.result,
      cancel: (reason?: unknown) => this.cancel(reason),
      dispose: () => this.dispose(),
    }
  }

  /** The start-up race. Rejects only after the wire has been released. */
  private async open(): Promise<string> {
    const { signal } = this.request
    const { startupTimeoutMs, startupTimeoutKey, timeoutMs, timeoutIncludesStartup, childName } = this.options
    const failed = new Promise<never>((_, reject) => (this.rejectStartup = reject))
    failed.catch(() => {
      // Observed by the race below; this keeps a failure after the race from going unhandled.
    })
    const tighter = timeoutIncludesStartup && timeoutMs !== undefined && timeoutMs < startupTimeoutMs
    const [limit, key] = tighter ? [timeoutMs, 'timeoutMs'] : [startupTimeoutMs, startupTimeoutKey]
    const startupTimer = setTimeout(() => this.rejectStartup?.(this.wire.startFailed(this.withStderr(`it did not finish ${this.stage} within ${key} (${limit} ms)`))), limit)
    const onAbort = () => this.rejectStartup?.(new SubagentError('ABORTED', `the delegation was cancelled while ${childName} was starting (stage ${this.stage})`, { cause: signal.reason }))
    signal.addEventListener('abort', onAbort, { once: true })
    void this.watchExit()
    try {
      const remoteId = await Promise.race([this.wire.open(), failed])
      // The parent began disposing while the child started: the child would outlive it.
      refuseDisposedParent(this.request.parent)
      return remoteId
    } catch (error) {
      // A failed start has no run: nothing may settle or replay afterwards.
      this.phase = 'settled'
      const reason = error instanceof SubagentError ? error : this.wire.startFailed(this.withStderr(errorMessage(error)))
      await this.release().catch((releaseError: unknown) => {
        throw new SubagentError(reason.code, `${reason.message}; then stopping ${childName} failed: ${errorMessage(releaseError)}`, { cause: error })
      })
      throw reason
    } finally {
      this.rejectStartup = undefined
      clearTimeout(startupTimer)
      signal.removeEventListener('abort', onAbort)
    }
  }

  private publish(): void {
    this.phase = 'running'
    const { signal } = this.request
    const { timeoutMs, timeoutIncludesStartup } = this.options
    if (timeoutMs !== undefined) {
      const left = timeoutIncludesStartup ? Math.max(0, this.startedAt + timeoutMs - Date.now()) : timeoutMs
      this.later(left, () => this.timeOut(timeoutMs))
    }
    const onAbort = () => this.cancel(signal.reason)
    signal.addEventListener('abort', onAbort, { once: true })
    this.detachSignal = () => signal.removeEventListener('abort', onAbort)
    this.wire.begin?.()
    for (const failure of this.afterPublication.splice(0)) failure()
    // Aborted between the last start-up step and here: the listener above can no longer fire.
    if (signal.aborted) this.cancel(signal.reason)
  }

  /** With a local process: its exit fails the start, or ends the run once frames it wrote have drained. */
  private async watchExit(): Promise<void> {
    const hooks = this.options.process
    if (!hooks) return
    await hooks.exited()
    if (this.settled) return
    await new Promise<void>((resolve) => setTimeout(resolve, EXIT_DRAIN_MS))
    const how = hooks.howItEnded()
    if (this.phase === 'starting') return this.failStartup(this.wire.startFailed(this.withStderr(`it ${how}`)), () => this.lostMidRun(how))
    this.lostMidRun(how)
  }

  private lostMidRun(how: string): void {
    if (this.settled) return
    if (this.stopping === 'cancelled') return this.settle(this.wire.result('aborted', 'the run was cancelled', 'cancelled'))
    this.fail(this.withStderr(`${this.options.childName} ${how} during ${this.stage}`), 'lost')
  }

  moveTo(stage: string): void {
    this.stage = stage
  }

  get reporting(): boolean {
    return this.request.progress !== undefined && !this.settled
  }

  report(update: SubagentProgress): void {
    if (!this.settled) this.request.progress?.report(update)
  }

  failStartup(error: SubagentError, ifRunning: () => void): void {
    if (this.phase === 'running') return ifRunning()
    if (this.phase === 'settled') return
    this.afterPublication.push(ifRunning)
    // A failure read in the same chunk as the last start-up reply loses to it: the wire's
    // `open` is still resolving (a few microtasks), so the rejection waits one turn of the
    // event loop, and a start that won meanwhile replays the failure as the run's end.
    setImmediate(() => {
      if (this.phase === 'starting') this.rejectStartup?.(error)
    })
  }

  cancel(reason?: unknown): void {
    if (this.phase !== 'running' || this.stopping) return
    this.stopping = 'cancelled'
    const detail = reason === undefined ? undefined : errorMessage(reason)
    const { interrupt } = this.wire
    if (!interrupt) {
      this.settle(this.wire.result('aborted', `the run was cancelled${detail ? `: ${detail}` : ''}`, 'cancelled'))
      return void this.releaseInBackground()
    }
    interrupt.send()
    const { cancelGraceMs, cancelGraceKey, childName } = this.options
    this.later(cancelGraceMs, () => {
      this.settle(this.wire.result('aborted', `the run was cancelled: ${childName} did not confirm ${interrupt.name} within ${cancelGraceKey} (${cancelGraceMs} ms)`, 'cancelled'))
      this.releaseInBackground()
    })
  }

  private timeOut(timeoutMs: number): void {
    if (this.settled) return
    this.stopping = 'timeout'
    this.wire.interrupt?.send()
    this.fail(`${this.options.childName} did not finish within timeoutMs (${timeoutMs} ms) (stage ${this.stage}); it was stopped`, 'timeout')
  }

  fail(diagnostic: string, ending?: RemoteEnding): void {
    if (this.phase === 'starting') return void this.afterPublication.push(() => this.fail(diagnostic, ending))
    if (this.settled) return
    this.settle(this.wire.result('error', diagnostic, ending))
    this.releaseInBackground()
  }

  settle(result: SubagentResult): void {
    // An outcome read while the start is still resolving belongs to the run it becomes.
    if (this.phase === 'starting') return void this.afterPublication.push(() => this.settle(result))
    if (this.settled) return
    this.phase = 'settled'
    this.clearTimers()
    this.detachSignal()
    this.resolveResult(result)
  }

  /** Cancel what is left, give the child its grace period to confirm, then release it. */
  dispose(): Promise<void> {
    this.disposal ??= (async () => {
      this.cancel('the run was disposed before it finished')
      await this.result
      await this.release()
    })()
    return this.disposal
  }

  private release(): Promise<void> {
    this.releasing ??= this.wire.close()
    return this.releasing
  }

  private releaseInBackground(): void {
    this.release().catch(() => {
      // dispose() awaits the same release and reports its failure to the run's owner.
    })
  }

  withStderr(message: string): string {
    const tail = quoteStderr(this.options.process?.stderr() ?? '')
    return tail && !message.includes(tail) ? `${message}; stderr: ${tail}` : message
  }

  later(ms: number, action: () => void): void {
    const timer = setTimeout(() => {
      this.timers.delete(timer)
      action()
    }, ms)
    this.timers.add(timer)
  }

  private clearTimers(): void {
    for (const timer of this.timers) clearTimeout(timer)
    this.timers.clear()
  }
}

/** The part of a process tree (`@dsh/process`'s `ProcessTree`) the hooks read. */
export interface WatchedProcessTree<Exit> {
  readonly pid: number | undefined
  readonly exited: Promise<Exit>
  readonly exit: Exit | undefined
  stderr(): string
}

/** Process hooks over a tree the wire creates when the core asks for it (hence the getter). */
export function processTreeHooks<Exit>(tree: () => WatchedProcessTree<Exit> | undefined, describeExit: (exit: Exit) => string): RemoteProcessHooks {
  return {
    get pid() {
      return tree()?.pid
    },
    exited: () => tree()?.exited ?? new Promise<never>(() => {}),
    stderr: () => tree()?.stderr() ?? '',
    howItEnded: () => {
      const exit = tree()?.exit
      return exit === undefined ? 'stopped answering' : describeExit(exit)
    },
  }
}
