export type SubagentErrorCode =
  | 'DUPLICATE_PROVIDER'
  | 'NO_PROVIDER'
  | 'UNSUPPORTED_CAPABILITY'
  | 'INVALID_REQUEST'
  | 'DEPTH_LIMIT'
  | 'ABORTED'
  | 'START_FAILED'

/** Every failure of the seam carries a stable code; messages say what to do next. */
export class SubagentError extends Error {
  override name = 'SubagentError'
  constructor(readonly code: SubagentErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options)
  }
}
