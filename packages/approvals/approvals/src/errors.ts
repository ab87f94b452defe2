import { DshError } from '@dsh/base'

export type ApprovalErrorCode =
  /** A rule or setting of the broker's configuration that cannot be used. */
  | 'INVALID_CONFIG'
  /** A front-end without a name or an ask function. */
  | 'INVALID_FRONT_END'

export class ApprovalError extends DshError<ApprovalErrorCode> {}
