/** Where a task stands. `running` is the only live status; the other three are final. */
export type { TaskStatus } from '@dsh/base'
import type { TaskStatus } from '@dsh/base'

export type SettledStatus = Exclude<TaskStatus, 'running'>

/**
 * How a task's output is read. `stream`: incremental text read through a cursor while
 * the work runs (a background command). `final`: one answer, available once it settles
 * (a background subagent).
 */
export type TaskOutputMode = 'stream' | 'final'

/** What a producer's `done` resolves with once its work has stopped. */
export type TaskOutcome =
  | { status: 'completed'; output?: string; detail?: string }
  | { status: 'failed'; detail: string; output?: string }
  | { status: 'killed'; detail?: string; output?: string }

/** A slice of a stream task's output, from a cursor to what has been produced so far. */
export interface StreamSlice {
  /**
   * What is still retained of the output from the cursor on. Where a bounded buffer
   * dropped characters, the producer puts a marker line in their place saying how many.
   */
  text: string
  /** The cursor to read from next time: everything before it has been handed out. */
  next: number
  /** How many characters from the cursor on were dropped before anyone read them. */
  skipped: number
}

/** What a producer hands to `ctx.tasks.register`. */
export interface TaskRegistration {
  /** Lowercase word (`bash`, `subagent`); the id prefix. */
  kind: string
  /** A short human label (the command, the delegation's description). */
  label: string
  /** The agent id that owns the task: only it may read, wait on or kill it. Absent: anyone may. */
  owner?: string
  /**
   * Stop the work. Called at most once, by `kill` or by the owner's disposal; the
   * producer must then settle `done` once the work has really stopped.
   */
  cancel(reason: string): void
  /**
   * Settles when the work has stopped, never earlier (a subagent: after `run.dispose()`;
   * a command: after its process tree is gone). A rejection settles the task `failed`.
   */
  done: Promise<TaskOutcome>
  /**
   * Present for stream kinds: read the output from `cursor` (0 = the beginning). Must keep
   * working after `done` settles, so the tail can still be read.
   */
  readOutput?(cursor: number): StreamSlice
  /**
   * Whether the work is still waiting to start (a background child queued for a slot of its
   * delegation tree's cap). A queued task is live (it can be read, waited on and killed) but
   * does not count against `maxLiveTasksPerOwner`: its queue has its own bound.
   */
  queued?(): boolean
  /**
   * What a running task waits on now, in a few words, when it waits on someone (an
   * approval its child asked for: `approval of bash npm test, asked by spawn "x"`): the
   * owner reads it in the task's status, so nothing waits unseen.
   */
  waiting?(): string | undefined
}

/**
 * A slot taken by `ctx.tasks.reserve`: it counts against the owner's live-task limit
 * until it is bound to a task or released. Use it exactly once.
 */
export interface TaskReservation {
  /**
   * Bind the slot to a task (kind and owner are the reservation's); returns its id. Throws
   * `INVALID_TASK` for a malformed registration and `OWNER_GONE` when the owner was disposed
   * meanwhile; either way the slot is given back.
   */
  register(registration: Omit<TaskRegistration, 'kind' | 'owner'>): string
  /** Give the slot back (the start failed before there was a task). Idempotent; a no-op after `register`. */
  release(): void
}

/** A snapshot of one task, safe to hand out. */
export interface TaskInfo {
  id: string
  kind: string
  label: string
  owner?: string
  status: TaskStatus
  /** Present while a `running` task is still waiting to start (see `TaskRegistration.queued`). */
  queued?: true
  /** What a running task waits on now (see `TaskRegistration.waiting`). */
  waiting?: string
  outputMode: TaskOutputMode
  /** Milliseconds since the epoch. */
  startedAt: number
  endedAt?: number
  /** Status-line detail of a settled task: why it failed or was killed, an exit code. */
  detail?: string
  /** Whether the owner has seen the settlement (read, wait, kill or a completion notice). */
  reported: boolean
}

/** The result of `read` and `wait`. */
export interface TaskRead {
  task: TaskInfo
  /**
   * `stream`: the output since the previous read. `final`: the final output once the
   * task has settled (also partial output of a failed or killed one), else empty.
   */
  text: string
  /** `stream` only: characters dropped before this read could see them. */
  skipped: number
}

/** Called once per task, when it settles (after its work has stopped). */
export type TaskSettledListener = (task: TaskInfo) => void
