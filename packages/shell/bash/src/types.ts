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
  /**
   * Run the command confined (see `BashSandbox`). An executor that cannot confine it
   * refuses the request (`SANDBOX_UNAVAILABLE`); it never runs it unconfined instead.
   */
  sandbox?: BashSandbox
  /**
   * The agent whose command this is (the bash tool sets it). Only routers read it
   * (`ctx.bash.addRouter`): `dsh acp` sends a session's commands to its client's terminal.
   */
  agentId?: string
}

/**
 * Picks another executor for a request, or `undefined` to leave it to the registered one.
 * Added with `ctx.bash.addRouter`: a deliberate exception to "one executor per context",
 * for a host that runs some agents' commands elsewhere (`dsh acp`: an ACP session whose
 * client offers a terminal runs its agents' commands there).
 */
export type BashRouter = (request: BashRequest) => BashExecutor | undefined

/**
 * A confined run: the whole file system read-only except `writable`, a private `/tmp`,
 * no other process visible, no network unless `network`.
 */
export interface BashSandbox {
  /**
   * Absolute directories the command may write to (the workspace, usually its cwd), except
   * the git data of repositories in them, which stays read-only. May be empty. Never `/`, nor
   * a directory that is or holds `/proc`, `/dev`, `/tmp`, `/sys` or `/run` (refused).
   */
  writable: readonly string[]
  /** Whether the command may use the network (off: a network namespace of its own, with only loopback). */
  network: boolean
  /**
   * Absolute directories that stay visible, read-only, although they are under `/tmp`
   * (which the sandbox replaces with a private one): e.g. the repository a git worktree
   * belongs to, without which git cannot read the worktree. Elsewhere everything is
   * visible read-only anyway. A directory that does not exist is left out.
   */
  readable?: readonly string[]
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
  /** The command could not be started (bad cwd, no bash, a sandbox that refused to set up: see `refusedBySandbox`). */
  error?: string
  /** The sandbox refused to run the command (its set-up failed, e.g. a writable directory that does not exist); `error` quotes it. */
  refusedBySandbox?: boolean
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
  /** The shell's pid, which is also its process group id (in a sandbox: bubblewrap's, outside it); absent if it never started. */
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
  /**
   * Why this executor cannot run sandboxed commands here (one line naming what to
   * install), or `undefined` when it can. An executor without this member cannot confine
   * commands at all, and `ctx.bash` refuses every request with a `sandbox`.
   */
  sandboxProblem?(): string | undefined
}
