import { DshError } from '@dsh/base'

export type SessionErrorCode =
  /** `create` was given the id of a session that already exists. */
  | 'DUPLICATE_SESSION'
  /** No live or stored session has that id. */
  | 'NOT_FOUND'
  /** The operation needs a storage backend (`@dsh/session-jsonl`) and none is loaded. */
  | 'NO_STORAGE'
  /** A second storage backend tried to attach. */
  | 'DUPLICATE_STORAGE'
  /** A stored session does not read back consistently (the message names what). */
  | 'CORRUPT'
  /** The session was released: it takes no new events. */
  | 'RELEASED'

/** Every failure of the session store and of a session. */
export class SessionError extends DshError<SessionErrorCode> {}
