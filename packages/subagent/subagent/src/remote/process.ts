/**
 * A remote child's local process, as the remote lifecycle watches it: its exit (which
 * fails a start, or ends a turn once the frames it already wrote have drained) and the last
 * of its stderr (quoted in every diagnostic).
 */

/** A local child process behind a remote child. */
export interface RemoteProcess {
  readonly pid: number | undefined
  /** Resolves once the process has exited (or failed to spawn). */
  exited(): Promise<unknown>
  /** The last of what it wrote to stderr. */
  stderr(): string
  /** How it ended, as a predicate: "exited with code 3", "was killed by SIGKILL". */
  howItEnded(): string
}

/** After the process exits, how long frames it already wrote may take to arrive before the exit decides. */
export const EXIT_DRAIN_MS = 1000

/** How much of a child's stderr a diagnostic quotes. */
export const STDERR_QUOTE_CHARS = 600

/**
 * The last of a child's stderr as one plain line: colours stripped (Codex logs with ANSI
 * escapes), white space folded, at most `STDERR_QUOTE_CHARS` long (the end is kept: the
 * last lines say why it stopped).
 */
export function quoteStderr(stderr: string): string {
  const plain = stderr.replace(/\x1b\[[0-9;]*m/g, '').replace(/\s+/g, ' ').trim()
  return plain.length > STDERR_QUOTE_CHARS ? `…${plain.slice(-STDERR_QUOTE_CHARS)}` : plain
}

/** `message` with the last of `process`'s stderr on one line, when there is any (and it is not quoted already). */
export function withStderr(process: Pick<RemoteProcess, 'stderr'> | undefined, message: string): string {
  const tail = quoteStderr(process?.stderr() ?? '')
  return tail && !message.includes(tail) ? `${message}; stderr: ${tail}` : message
}

/** The part of a process tree (`@dsh/process`'s `ProcessTree`) the lifecycle reads. */
export interface WatchedProcessTree<Exit> {
  readonly pid: number | undefined
  readonly exited: Promise<Exit>
  readonly exit: Exit | undefined
  stderr(): string
}

/** A `RemoteProcess` over a process tree. */
export function processOfTree<Exit>(tree: WatchedProcessTree<Exit>, describeExit: (exit: Exit) => string): RemoteProcess {
  return {
    get pid() {
      return tree.pid
    },
    exited: () => tree.exited,
    stderr: () => tree.stderr(),
    howItEnded: () => (tree.exit === undefined ? 'stopped answering' : describeExit(tree.exit)),
  }
}
