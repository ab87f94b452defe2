/**
 * `work()`, with a synchronous throw turned into a rejected promise, as an async function
 * would do. For functions on a hot path (a tool call, a child's start, a disposal) that
 * are written as plain functions returning promises, so that they keep no suspended frame
 * and add no tick, yet whose callers must see a refusal as a rejection, never as a throw.
 */
/** A module imported on first use: `load` imports it once per process; `loaded` is it once that import finished. */
export interface ImportedOnFirstUse<T> {
  load(): Promise<T>
  loaded(): T | undefined
}

/**
 * `importIt` (an `import()` of a large SDK, written where the bundler sees it), run on the
 * first `load` rather than when the caller's module loads, and once per process: a run that
 * never uses the SDK never parses it. A failed import stays failed, as a failed module does.
 * `loaded()` is for code that only meets the SDK's objects once it is there (an error
 * classified by the SDK's classes), and must not start the import.
 */
export function importOnFirstUse<T>(importIt: () => Promise<T>): ImportedOnFirstUse<T> {
  let loading: Promise<T> | undefined
  let loaded: T | undefined
  return {
    load: () => (loading ??= importIt().then((module) => (loaded = module))),
    loaded: () => loaded,
  }
}

export function rejectOnThrow<T>(work: () => Promise<T>): Promise<T> {
  try {
    return work()
  } catch (error) {
    return Promise.reject(error)
  }
}
