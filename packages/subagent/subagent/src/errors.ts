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

/** Every failure of the seam carries a stable code; messages say what to do next. */
export class SubagentError extends DshError<SubagentErrorCode> {}
