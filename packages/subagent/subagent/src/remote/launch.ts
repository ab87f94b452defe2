/**
 * The one launch race of every remote child. A start (a one-shot run up to publication, a
 * continuable child opened or reopened, a Claude Code turn up to its init message) races
 * four things, and whichever ends it first decides:
 *
 *   the work resolves ─────────────────────────────▶ started
 *   the start-up timeout ─▶ START_FAILED "it did not finish <stage> within <key> (N ms)"
 *   the signal aborts ────▶ ABORTED "… while <child> was starting (stage …)"
 *   the process exits ────▶ (after EXIT_DRAIN_MS) START_FAILED "it <how it ended>"
 *   the wire breaks ──────▶ START_FAILED in the wire's words (garbage, an oversized frame, …)
 *
 * A failed launch closes the child before it rejects, so nothing is left running.
 */
import { errorMessage } from '@dsh/base'
import type { Agent } from '@dsh/agent'
import { refuseDisposedParent } from '../admission.js'
import { SubagentError } from '../errors.js'
import { EXIT_DRAIN_MS, withStderr, type RemoteProcess } from './process.js'

/** What a launch's limits and messages need from the transport. */
export interface LaunchWords {
  /** How messages name the child: "the ACP agent", "the codex app-server", "Claude Code". */
  readonly childName: string
  readonly startupTimeoutMs: number
  /** The config key behind `startupTimeoutMs`, named in its message. */
  readonly startupTimeoutKey: string
  /** A `START_FAILED` error in the wire's words (it may name the command and the stage). */
  startFailed(message: string, stage: string): SubagentError
}

/** Where a start is and how it fails: what a connection (and a turn before it is accepted) reports into. */
export interface StartControl {
  readonly stage: string
  /** Record where the start is; every message names it. */
  moveTo(stage: string): void
  /**
   * The child broke its wire while starting (garbage on stdout, an oversized frame, a
   * protocol error): the start fails with `error`. A failure read in the same chunk as
   * the start's last reply loses to it: with `ifStarted`, the rejection waits one turn of
   * the event loop, and a start that won meanwhile runs `ifStarted` instead.
   */
  failStartup(error: SubagentError, ifStarted?: () => void): void
  /** `message` with the last of the child's stderr on one line, when there is any. */
  withStderr(message: string): string
}

/**
 * One start-up window: opened with its timer and signal, it races what is awaited through
 * it until `close`. The one-shot run keeps one open from the launch until its turn is
 * accepted; a continuable child's launch, one for the launch.
 */
export class StartupWindow implements StartControl {
  private rejectStart: ((error: SubagentError) => void) | undefined
  private readonly failed: Promise<never>
  private readonly timer: NodeJS.Timeout
  private readonly onAbort: () => void
  private closed = false
  /** What to run instead of failing, for failures that lost to the start (see `failStartup`). */
  private lost: Array<() => void> = []
  private process: RemoteProcess | undefined

  constructor(
    private readonly words: LaunchWords,
    private readonly signal: AbortSignal,
    public stage: string,
    /** `timeoutMs`, when it bounds the whole run and is tighter than the start-up timeout. */
    tighter?: { ms: number; key: string },
  ) {
    this.failed = new Promise<never>((_, reject) => (this.rejectStart = reject))
    this.failed.catch(() => {
      // Observed by `race`; this keeps a failure after the last race from going unhandled.
    })
    const [limit, key] = tighter && tighter.ms < words.startupTimeoutMs ? [tighter.ms, tighter.key] : [words.startupTimeoutMs, words.startupTimeoutKey]
    this.timer = setTimeout(() => this.reject(words.startFailed(this.withStderr(`it did not finish ${this.stage} within ${key} (${limit} ms)`), this.stage)), limit)
    this.onAbort = () => this.reject(new SubagentError('ABORTED', `the delegation was cancelled while ${words.childName} was starting (stage ${this.stage})`, { cause: signal.reason }))
    signal.addEventListener('abort', this.onAbort, { once: true })
  }

  /** Watch `process` from now on: its exit fails the start once the frames it wrote have drained. */
  watch(process: RemoteProcess | undefined): void {
    if (process === undefined || this.process === process) return
    this.process = process
    void process.exited().then(async () => {
      if (this.closed) return
      await new Promise((resolve) => setTimeout(resolve, EXIT_DRAIN_MS))
      this.reject(this.words.startFailed(this.withStderr(`it ${process.howItEnded()}`), this.stage))
    })
  }

  moveTo(stage: string): void {
    this.stage = stage
  }

  withStderr(message: string): string {
    return withStderr(this.process, message)
  }

  /** `work`, unless the window fails first. */
  race<T>(work: Promise<T>): Promise<T> {
    return Promise.race([work, this.failed])
  }

  failStartup(error: SubagentError, ifStarted?: () => void): void {
    if (this.closed) return ifStarted?.()
    if (ifStarted === undefined) return this.reject(error)
    this.lost.push(ifStarted)
    // The start's last reply is still resolving (a few microtasks) when a failure read in
    // the same chunk arrives: the rejection waits one turn of the event loop.
    setImmediate(() => this.reject(error))
  }

  /** The start is over: stop the timer and the signal; `won` runs the failures that lost to it. */
  close(won: boolean): void {
    if (this.closed) return
    this.closed = true
    this.rejectStart = undefined
    clearTimeout(this.timer)
    this.signal.removeEventListener('abort', this.onAbort)
    const lost = this.lost.splice(0)
    if (won) for (const after of lost) after()
  }

  private reject(error: SubagentError): void {
    if (!this.closed) this.rejectStart?.(error)
  }
}

/** What a transport's `connect` gives: the child at once (its process spawned), and its opening. */
export interface RemoteConnection<Child> {
  /** Made at once: the launch watches its process and closes it if the launch fails. */
  readonly child: Child
  /** The handshake up to a child that takes turns (initialize, open or reopen the session). */
  readonly opened: Promise<void>
}

/** The child a launch makes, as the lifecycle needs it. */
export interface LaunchedChild {
  /** Its local process; absent for a child reached over the network (an A2A worker). */
  readonly process?: RemoteProcess
  /** Stop it; idempotent; rejects only when something outlived SIGKILL. */
  close(): Promise<void>
}

/**
 * Open a connection inside `window` and wait for it. On any failure the child is closed
 * before this rejects (`START_FAILED`, `ABORTED`), and a failure to close is named too.
 */
export async function openInWindow<Child extends LaunchedChild>(window: StartupWindow, connect: (control: StartControl) => RemoteConnection<Child>, words: LaunchWords): Promise<Child> {
  const { child, opened } = connect(window)
  window.watch(child.process)
  try {
    await window.race(opened)
    return child
  } catch (error) {
    throw await closedAfterFailure(child, error, window, words)
  }
}

/** What launching a child needs of its transport: its words, and its connection file's `connect`. */
export interface Launcher<Child> extends LaunchWords {
  /** Where a launch starts (`spawn`). */
  readonly initialStage: string
  connect(control: StartControl): RemoteConnection<Child>
}

/**
 * The launch of a child that outlives its start (a continuable conversation's): the race,
 * then the child. With `parent`, a parent that began disposing meanwhile refuses the child
 * (closed again): it would outlive the parent.
 */
export async function launchRemoteChild<Child extends LaunchedChild>(launcher: Launcher<Child>, signal: AbortSignal, parent?: Agent): Promise<Child> {
  if (signal.aborted) throw new SubagentError('ABORTED', `the delegation was cancelled before ${launcher.childName} was started`, { cause: signal.reason })
  const window = new StartupWindow(launcher, signal, launcher.initialStage)
  let child: Child
  try {
    child = await openInWindow(window, (control) => launcher.connect(control), launcher)
  } finally {
    window.close(false)
  }
  if (parent === undefined) return child
  try {
    refuseDisposedParent(parent)
  } catch (error) {
    await child.close()
    throw error
  }
  return child
}

/** The start's failure as a `SubagentError`, once `child` is closed (its own failure to close added). */
export async function closedAfterFailure(child: LaunchedChild, error: unknown, window: StartupWindow, words: LaunchWords): Promise<SubagentError> {
  const reason = error instanceof SubagentError ? error : words.startFailed(window.withStderr(errorMessage(error)), window.stage)
  try {
    await child.close()
  } catch (closeError) {
    return new SubagentError(reason.code, `${reason.message}; then stopping ${words.childName} failed: ${errorMessage(closeError)}`, { cause: error })
  }
  return reason
}
