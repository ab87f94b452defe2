import { DshError } from '@dsh/base'

export type WorkflowErrorCode =
  /** The workflow file could not be read or imported, or exports no function. */
  | 'LOAD'
  /** `agent()` named neither a helper nor a provider, or was given options it cannot honour. */
  | 'UNKNOWN_HELPER'
  | 'INVALID_CALL'
  /** A call's child did not complete (its stop reason and diagnostic are in the message). */
  | 'CALL_FAILED'
  /** The tree's budget is spent: the workflow ends with what finished. */
  | 'BUDGET'
  /** The tree's wall time ran out before the workflow returned. */
  | 'WALL_TIME'
  /** The run was cancelled (a signal). */
  | 'CANCELLED'
  /** A resume found a finished call with side effects outside a workspace and no leave to run it again. */
  | 'SIDE_EFFECTS'
  /** `bestOf` could not choose: no attempt passed, or its judge failed with no check to fall back on. */
  | 'NO_WINNER'

export class WorkflowError extends DshError<WorkflowErrorCode> {}
