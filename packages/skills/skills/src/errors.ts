import { DshError } from '@dsh/base'
import type { DefinitionErrorCode } from '@dsh/agent-definitions'

/**
 * What is wrong with a skill, as for agent definitions (the same front-matter reader and
 * the same codes): `SYNTAX`, `INVALID_FIELD`, `TOO_LARGE`, `BAD_NAME`, `DUPLICATE_NAME`,
 * `UNREADABLE`, `MISSING_DIR`.
 */
export type SkillErrorCode = Exclude<DefinitionErrorCode, 'UNKNOWN_FIELD'>

/** A skill dsh refuses; the message is one line starting `FILE:LINE:` (or `FILE:`). */
export class SkillError extends DshError<SkillErrorCode> {}
