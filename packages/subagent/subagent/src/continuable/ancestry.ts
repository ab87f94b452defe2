/**
 * The durable ancestry of sessions: who started whom, read from session headers (live
 * first, then stored), so authority holds for children that are not in memory.
 */
import { errorMessage } from '@dsh/base'
import type { SessionHeader, SessionStore } from '@dsh/session'

export type HeaderLookup = { header: SessionHeader } | { missing: true } | { unreadable: string }

/** The header of session `id`: a live one, else the stored one; never creates or changes anything. */
export async function lookUpHeader(sessions: SessionStore, id: string): Promise<HeaderLookup> {
  const live = sessions.get(id)
  if (live) return { header: live.header }
  if (sessions.storageName === undefined) return { missing: true }
  try {
    const stored = await sessions.readStored(id)
    return stored ? { header: stored.header } : { missing: true }
  } catch (error) {
    return { unreadable: errorMessage(error) }
  }
}

/**
 * Whether `ancestorId` started `header`'s session, directly or through intermediate
 * sessions of any kind. Cycle-safe; an unreadable link ends the walk (not an ancestor).
 */
export async function isDurableAncestor(sessions: SessionStore, ancestorId: string, header: SessionHeader): Promise<boolean> {
  const seen = new Set<string>([header.id])
  let current = header.parentSession
  while (current !== undefined && !seen.has(current)) {
    if (current === ancestorId) return true
    seen.add(current)
    const found = await lookUpHeader(sessions, current)
    current = 'header' in found ? found.header.parentSession : undefined
  }
  return false
}
