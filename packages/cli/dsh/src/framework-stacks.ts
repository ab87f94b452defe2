/**
 * Cordis records where each plugin start, effect and disposal came from by creating an
 * `Error` for it (its stack is spliced into a failure's), a few hundred of them while a
 * composition starts and again while it stops. Capturing those stacks is a measurable part
 * of every start, and they reach the user only through `--verbose`: without it, every
 * failure of a start or a stop is printed by its message. So, unless verbose, stack traces
 * are not captured while plugins start and while they stop (`Error.stackTraceLimit` is 0
 * for that window); what runs between (the turns) keeps them.
 *
 * Scopes nest (a count, so an inner scope ending does not restore the limit early) and are
 * process-wide: an error created by other work during the window has no stack either. The
 * commands open them only where nothing else runs yet (start-up) or where the process is
 * shutting down.
 */

let openScopes = 0
let savedLimit: number | undefined

/** Run `work` with stack capture off unless `keepStacks`; the limit is restored however it ends. */
export async function withoutFrameworkStacks<T>(keepStacks: boolean, work: () => Promise<T>): Promise<T> {
  if (keepStacks) return work()
  if (openScopes++ === 0) {
    savedLimit = Error.stackTraceLimit
    Error.stackTraceLimit = 0
  }
  try {
    return await work()
  } finally {
    if (--openScopes === 0) {
      Error.stackTraceLimit = savedLimit ?? 10
      savedLimit = undefined
    }
  }
}
