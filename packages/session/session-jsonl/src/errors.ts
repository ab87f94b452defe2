import { DshError, printable } from '@dsh/base'
import { SessionError } from '@dsh/session'

/**
 * A session file that cannot be read back as it was written: its content is wrong at
 * `line` (1-based). It is a `SessionError` with code `CORRUPT`, like the corruption the
 * store itself detects (a seed longer than its parent), so callers handle both the same
 * way. The message is one line: `<file>:<line>: <what is wrong>`.
 */
export class CorruptSessionFileError extends SessionError {
  constructor(readonly file: string, readonly line: number, detail: string) {
    // The detail may quote the file (a JSON parser's message does): never let its bytes act on a terminal.
    super('CORRUPT', printable(`${file}:${line}: ${detail}`))
  }
}

export type SessionJsonlErrorCode =
  /** The id cannot be a file name (path separators, `..`, other characters). */
  | 'INVALID_ID'
  /** A new session's file already holds a different session. */
  | 'FOREIGN_FILE'
  /** Appending to the file failed (disk full, directory removed, …). */
  | 'WRITE_FAILED'
  /** Another writer appended to the file behind this one's back. */
  | 'CONCURRENT_WRITER'
  /** Another live process (or another storage in this one) is running the session. */
  | 'IN_USE'
  /** The session directory is not a directory (a file, or a path through a file). */
  | 'NOT_A_DIRECTORY'
  /** The file or directory exists but cannot be read (permissions, a directory named like a session, too large). */
  | 'UNREADABLE'

/** Failures of the JSONL storage other than a corrupt file; the message names the file. */
export class SessionJsonlError extends DshError<SessionJsonlErrorCode> {}
