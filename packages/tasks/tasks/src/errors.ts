import { DshError } from '@dsh/base'

export type TaskErrorCode =
  /** A malformed registration (kind, label, missing `done`/`cancel`). */
  | 'INVALID_TASK'
  /** No task surface (`@dsh/tool-tasks`) is loaded: nobody could collect or stop the task. */
  | 'NO_SURFACE'
  /** The owner is not a live agent (unknown, disposing or disposed). */
  | 'OWNER_GONE'
  /** The owner already has `maxLiveTasksPerOwner` live tasks (or reserved slots). */
  | 'LIMIT'
  | 'UNKNOWN_TASK'
  /** The caller is not the task's owner. */
  | 'NOT_OWNER'
  /** A `wait` whose signal was aborted. */
  | 'ABORTED'

/** Every failure of `ctx.tasks` carries a stable code; messages say what to do next. */
export class TaskError extends DshError<TaskErrorCode> {}
