/**
 * `work()`, with a synchronous throw turned into a rejected promise, as an async function
 * would do. For functions on a hot path (a tool call, a child's start, a disposal) that
 * are written as plain functions returning promises, so that they keep no suspended frame
 * and add no tick, yet whose callers must see a refusal as a rejection, never as a throw.
 */
export function rejectOnThrow<T>(work: () => Promise<T>): Promise<T> {
  try {
    return work()
  } catch (error) {
    return Promise.reject(error)
  }
}
