export type BashErrorCode = 'DUPLICATE_EXECUTOR' | 'NO_EXECUTOR' | 'INVALID_REQUEST'

/** Failures of the `ctx.bash` seam; messages say what to do next. */
export class BashError extends Error {
  override name = 'BashError'
  constructor(readonly code: BashErrorCode, message: string) {
    super(message)
  }
}
