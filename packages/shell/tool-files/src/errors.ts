import { DshError, errorMessage } from '@dsh/base'

export type FileToolErrorCode =
  | 'INVALID_PATH'
  | 'INVALID_ARGS'
  | 'INVALID_CONFIG'
  | 'OUTSIDE'
  | 'SANDBOXED'
  | 'GIT_DIRECTORY'
  | 'NOT_CANONICAL'
  | 'NOT_FOUND'
  | 'LINK_LOOP'
  | 'UNREADABLE'
  | 'IS_DIRECTORY'
  | 'NOT_A_FILE'
  | 'TOO_LARGE'
  | 'BINARY'
  | 'NO_MATCH'
  | 'NOT_UNIQUE'
  | 'TIMED_OUT'
  | 'BAD_PATTERN'

/** A call the file tools refuse: its message is the error result the model reads, one line naming what and why. */
export class FileToolError extends DshError<FileToolErrorCode> {}

/** A file system error in words (`no such file or directory`, `a symbolic link loop`, `permission denied`). */
export function fsProblem(error: unknown): string {
  switch ((error as NodeJS.ErrnoException | undefined)?.code) {
    case 'ENOENT':
      return 'no such file or directory'
    case 'ENOTDIR':
      return 'a part of the path is not a directory'
    case 'ELOOP':
      return 'a symbolic link loop (or too many links to follow)'
    case 'EACCES':
    case 'EPERM':
      return 'permission denied'
    case 'EISDIR':
      return 'it is a directory'
    default:
      return errorMessage(error)
  }
}
