import type { TaskState } from '@a2a-js/sdk'
import { assertNever, type StopReason } from '@dsh/base'
import { a2aSdk } from './sdk.js'

/** How a task state ends a run; `undefined` while the task is still going. */
export function stopReasonOfTaskState(state: TaskState): StopReason | undefined {
  const { TaskState } = a2aSdk()
  switch (state) {
    case TaskState.TASK_STATE_COMPLETED:
      return 'completed'
    case TaskState.TASK_STATE_CANCELED:
      return 'aborted'
    case TaskState.TASK_STATE_FAILED:
    case TaskState.TASK_STATE_REJECTED:
      return 'error'
    // A child that waits for credentials cannot get them from a delegation: it ends here.
    case TaskState.TASK_STATE_AUTH_REQUIRED:
      return 'error'
    // Not an end: the turn answers a dsh worker's approval request, or ends a question it cannot answer (`turn.ts`).
    case TaskState.TASK_STATE_INPUT_REQUIRED:
    case TaskState.TASK_STATE_UNSPECIFIED:
    case TaskState.TASK_STATE_SUBMITTED:
    case TaskState.TASK_STATE_WORKING:
      return undefined
    case TaskState.UNRECOGNIZED:
      return undefined
    default:
      return assertNever(state, 'A2A task state')
  }
}

/** The state's name as the protocol spells it, for diagnostics. */
export function taskStateName(state: TaskState): string {
  return (a2aSdk().TaskState[state] ?? String(state)).replace(/^TASK_STATE_/, '').toLowerCase()
}
