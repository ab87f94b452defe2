/**
 * Session ids as people type them: the whole id, or a unique tail of it (ids are long;
 * their tails are what people copy from `dsh sessions list`). One rule for every verb that
 * takes an id (`sessions show`, `run --resume`).
 */
import type { SessionHeader } from '@dsh/session'
import { UsageError } from './errors.js'

/** The stored id `wanted` names: itself when a session has it, else the one id ending with it; `wanted` unchanged when none does. */
export function resolveSessionId(headers: readonly SessionHeader[], wanted: string): string {
  if (headers.some((header) => header.id === wanted)) return wanted
  const matches = headers.filter((header) => header.id.endsWith(wanted))
  if (matches.length === 1) return matches[0]!.id
  if (matches.length > 1) throw new UsageError('USAGE', `"${wanted}" matches ${matches.length} sessions (${matches.slice(0, 3).map((header) => header.id).join(', ')}${matches.length > 3 ? ', …' : ''}); give more of the id`)
  return wanted
}
