/** One command to run. */
export interface BashRequest {
  /** Run with `bash -c`. */
  command: string
  /** Working directory (the session's cwd). */
  cwd: string
  /** Stop the command (its whole process tree) after this long; the exit then says `timedOut`. */
  timeoutMs?: number
  /** Aborting it stops the command, like `stop()`. */
  signal?: AbortSignal
  /** Extra environment on top of the executor's. */
  env?: Record<string, string>
}

/** How a command ended, once nothing of it is left running. */
export interface BashExit {
  /** The shell's exit code; `null` when it was ended by a signal or never started. */
  exitCode: number | null
  /** The signal that ended the shell, if one did. */
  signal: string | null
  /** Stopped because `timeoutMs` passed. */
  timedOut: boolean
  /** Stopped by `stop()` or the request's signal (a timeout counts as well). */
  stopped: boolean
  /** The shell exited but left processes in its group; they were stopped. */
  leftovers: boolean
  /** The command could not be started (bad cwd, no bash). */
  error?: string
}

/** A slice of the output from a cursor (the shape `@dsh/tasks` reads stream tasks with). */
export interface OutputSlice {
  /** Retained text from the cursor; a marker line stands where characters were dropped. */
  text: string
  /** Where the next read starts. */
  next: number
  /** Characters from the cursor on that were dropped before anyone read them. */
  skipped: number
}

/** A started command. Its output is stdout and stderr interleaved as they arrive, bounded. */
export interface BashProcess {
  /** The shell's pid, which is also its process group id; absent if it never started. */
  readonly pid: number | undefined
  /** Resolves when the shell and every process left in its group are gone and the output is drained. Never rejects. */
  readonly exited: Promise<BashExit>
  /** Output from `cursor` on (0: the beginning). Works during and after the run. */
  read(cursor: number): OutputSlice
  /** All retained output, with a marker where the middle was dropped. */
  output(): string
  /** Stop the whole process tree (SIGTERM, then SIGKILL after the grace period); resolves like `exited`. */
  stop(): Promise<BashExit>
}

/** Foreground result: the exit and the retained output. */
export interface BashResult extends BashExit {
  output: string
}

/** Runs commands somewhere (this machine, a sandbox, a remote host). Exactly one per context. */
export interface BashExecutor {
  readonly name: string
  /** Start a command; never throws for the command's own failure (that is in `exited`). */
  start(request: BashRequest): BashProcess
}
