import { SessionError } from '@dsh/session'

/**
 * A session file that cannot be read back as it was written. It is a `SessionError`
 * with code `CORRUPT`, like the corruption the store itself detects (a seed longer than
 * its parent), so callers handle both the same way.
 */
export class CorruptSessionFileError extends SessionError {
  override name = 'CorruptSessionFileError'
  constructor(readonly file: string, readonly line: number, detail: string) {
    super('CORRUPT', `${file}:${line}: ${detail}`)
  }
}

export type SessionJsonlErrorCode =
  /** The id cannot be a file name (path separators, `..`, other characters). */
  | 'INVALID_ID'
  /** A new session's file already holds a different session. */
  | 'FOREIGN_FILE'
  /** Appending to the file failed (disk full, directory removed, …). */
  | 'WRITE_FAILED'
  | 'CONCURRENT_WRITER'

export class SessionJsonlError extends Error {
  override name = 'SessionJsonlError'
  constructor(readonly code: SessionJsonlErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options)
  }
}
