import { DshError } from '@dsh/base'

export type SubagentErrorCode =
  | 'DUPLICATE_PROVIDER'
  | 'NO_PROVIDER'
  | 'UNSUPPORTED_CAPABILITY'
  | 'INVALID_REQUEST'
  | 'INVALID_CONFIG'
  | 'DEPTH_LIMIT'
  | 'PARENT_DISPOSED'
  | 'RUN_SETTLED'
  | 'ABORTED'
  | 'START_FAILED'
  /** Continuable children need `ctx.agents` (in-process creation and cold resume). */
  | 'CONTINUATION_UNAVAILABLE'
  /** Continuable children need session storage: they must be reachable after a restart. */
  | 'PERSISTENCE_UNAVAILABLE'
  /** A caller-reserved child id that is already live or stored. */
  | 'DUPLICATE_CHILD'
  /** No such child, its record is unreadable, or it has no (or an unknown) descriptor. */
  | 'NOT_RESUMABLE'
  /** The caller may not deliver to, or interrupt, that child. */
  | 'UNAUTHORIZED'
  /** A child named by a label that several of the caller's children have. */
  | 'AMBIGUOUS_CHILD'
  /** The delegation tree's queue of children waiting for a slot is full (`tree.maxQueued`). */
  | 'QUEUE_FULL'
  /** The delegation tree's budget is spent (`tree.budget`): no more children start in it. */
  | 'BUDGET'

/** Every failure of the seam carries a stable code; messages say what to do next. */
export class SubagentError extends DshError<SubagentErrorCode> {}
