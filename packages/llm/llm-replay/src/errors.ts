import { LlmError } from '@dsh/llm'

export type RecordingErrorCode = 'INVALID_RECORDING' | 'NO_RECORDING' | 'REPLAY_DIVERGED'

/**
 * A recording cannot be replayed: a file is missing, truncated or invalid (the message
 * names the file and line), a live session has no recording, or a session asked the model
 * something other than what was recorded (the message names the session, the call and the
 * first differing field). It is an `LlmError`, so the turn that made the request ends
 * `error` like any other model failure; never does another model answer instead.
 */
export class RecordingError extends LlmError<RecordingErrorCode> {}
