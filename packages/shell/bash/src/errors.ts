import { DshError } from '@dsh/base'

export type BashErrorCode =
  /** A second executor while one is registered. */
  | 'DUPLICATE_EXECUTOR'
  /** `start()` with no executor registered. */
  | 'NO_EXECUTOR'
  /** An empty command, a NUL character, a non-positive timeout. */
  | 'INVALID_REQUEST'
  /** A configuration that contradicts itself (the bash tool's timeouts). */
  | 'INVALID_CONFIG'
  /** A sandboxed command asked of an executor that cannot confine it here (bubblewrap missing or unable to create its namespaces). */
  | 'SANDBOX_UNAVAILABLE'

/** Failures of the `ctx.bash` seam and its tool; messages say what to do next. */
export class BashError extends DshError<BashErrorCode> {}
