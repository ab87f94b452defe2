import { DshError } from '@dsh/base'

export type DefinitionErrorCode =
  /** The file has no front matter, or its YAML does not parse. */
  | 'SYNTAX'
  /** A front-matter field dsh does not know (in a dsh file; a Claude Code file gets a note). */
  | 'UNKNOWN_FIELD'
  /** A known field with a value of the wrong kind. */
  | 'INVALID_FIELD'
  /** A file over `MAX_DEFINITION_BYTES`. */
  | 'TOO_LARGE'
  /** A name that is not a plain word (path characters, spaces, too long). */
  | 'BAD_NAME'
  /** Two files of one directory define one name. */
  | 'DUPLICATE_NAME'
  /** A file or directory that cannot be read (permissions, a symlink loop). */
  | 'UNREADABLE'
  /** A directory named in config that does not exist. */
  | 'MISSING_DIR'

/** A definition file dsh refuses; the message starts with `FILE:LINE:` (or `FILE:`). */
export class DefinitionError extends DshError<DefinitionErrorCode> {}
