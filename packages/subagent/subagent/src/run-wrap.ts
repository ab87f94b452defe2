/**
 * The one way to wrap a run: a stage of the start pipeline (the tree gate, a workspace) or
 * a caller (a helper's time limit) that changes what a run's result says, or adds work to
 * its disposal, wraps it here; everything else (its id, `cancel`, `sendMessage`,
 * `storedAt`) passes through unchanged.
 */
import type { SubagentResult, SubagentRun } from './types.js'

/** What a wrap changes of a run; what it leaves out is the run's own. */
export interface RunWrap {
  /** The result the wrapped run reports. */
  result?: Promise<SubagentResult>
  /** The wrapped run's disposal (it calls the inner run's `dispose` itself). */
  dispose?: () => Promise<void>
}

/** `run` with the result and disposal of `wrap`, everything else passed through. */
export function wrapRun(run: SubagentRun, wrap: RunWrap): SubagentRun {
  const wrapped: { -readonly [K in keyof SubagentRun]: SubagentRun[K] } = {
    id: run.id,
    local: run.local,
    result: wrap.result ?? run.result,
    cancel: (reason) => run.cancel(reason),
    dispose: wrap.dispose ?? (() => run.dispose()),
  }
  if (run.sendMessage !== undefined) wrapped.sendMessage = (message) => run.sendMessage!(message)
  if (run.storedAt !== undefined) wrapped.storedAt = run.storedAt
  return wrapped
}
