import { DshError } from '@dsh/base'

type A2aServerErrorCode = 'INVALID_OPTION' | 'INSECURE_LISTEN' | 'LISTEN_FAILED' | 'TASK_CANCELLED'
/**
 * A server set up wrongly by its host (client mistakes are protocol errors or 401s), or
 * `TASK_CANCELLED`: the reason a task's run is aborted with (a client's cancel, shutdown).
 */
export class A2aServerError extends DshError<A2aServerErrorCode> {}
