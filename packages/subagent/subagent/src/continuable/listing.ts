/**
 * Listing continuable children from the session headers (live and stored): a child is a
 * session whose header names its parent and holds a valid continuable descriptor.
 * Sessions without one (one-shot children, ordinary sessions) are walked through but not
 * listed, so a continuable grandchild under a one-shot child is still found.
 */
import type { SessionHeader, SessionStore } from '@dsh/session'
import { SubagentError } from '../errors.js'
import { parseDescriptor } from './descriptor.js'
import type { ContinuableChildInfo, ContinuableDescriptor } from './types.js'

interface CatalogueEntry {
  header: SessionHeader
  descriptor?: ContinuableDescriptor
}

/** Whether the child with this id is in memory and running a turn. */
export type RunningCheck = (id: string) => boolean

export async function listChildren(sessions: SessionStore, parentId: string, running: RunningCheck, signal?: AbortSignal): Promise<ContinuableChildInfo[]> {
  const byParent = await catalogue(sessions, signal)
  return Promise.all((byParent.get(parentId) ?? []).filter((entry) => entry.descriptor).map((entry) => infoOf(sessions, entry, 1, running)))
}

/** Pre-order, with parent and depth; iterative (deep chains cannot grow the stack) and cycle-safe. */
export async function listDescendants(sessions: SessionStore, rootId: string, running: RunningCheck, signal?: AbortSignal): Promise<ContinuableChildInfo[]> {
  const byParent = await catalogue(sessions, signal)
  const listed: Array<Promise<ContinuableChildInfo>> = []
  const seen = new Set<string>([rootId])
  const stack: Array<{ entry: CatalogueEntry; depth: number }> = (byParent.get(rootId) ?? []).map((entry) => ({ entry, depth: 1 })).reverse()
  while (stack.length > 0) {
    const { entry, depth } = stack.pop()!
    if (seen.has(entry.header.id)) continue
    seen.add(entry.header.id)
    if (entry.descriptor) listed.push(infoOf(sessions, entry, depth, running))
    for (const child of [...(byParent.get(entry.header.id) ?? [])].reverse()) stack.push({ entry: child, depth: depth + 1 })
  }
  return Promise.all(listed)
}

/** Every session header known (live over stored), grouped by parent, oldest first. */
async function catalogue(sessions: SessionStore, signal?: AbortSignal): Promise<Map<string, CatalogueEntry[]>> {
  const headers = new Map<string, SessionHeader>()
  if (sessions.storageName !== undefined) for (const header of await sessions.listStored()) headers.set(header.id, header)
  if (signal?.aborted) throw new SubagentError('ABORTED', 'listing the subagents was cancelled', { cause: signal.reason })
  for (const session of sessions.list()) headers.set(session.id, session.header)
  const byParent = new Map<string, CatalogueEntry[]>()
  for (const header of headers.values()) {
    if (!header.parentSession) continue
    const parsed = header.descriptor === undefined ? undefined : parseDescriptor(header.descriptor)
    const entry: CatalogueEntry = { header, ...(parsed && 'descriptor' in parsed && { descriptor: parsed.descriptor }) }
    const list = byParent.get(header.parentSession) ?? []
    list.push(entry)
    byParent.set(header.parentSession, list)
  }
  for (const list of byParent.values()) list.sort((a, b) => a.header.createdAt.localeCompare(b.header.createdAt) || a.header.id.localeCompare(b.header.id))
  return byParent
}

async function infoOf(sessions: SessionStore, entry: CatalogueEntry, depth: number, running: RunningCheck): Promise<ContinuableChildInfo> {
  const { header } = entry
  const descriptor = entry.descriptor!
  const live = sessions.get(header.id)
  // An unreadable stored child is listed with 0 turns: listing must not fail on one bad file.
  const turns = live ? countTurns(live.ownEvents()) : countTurns((await sessions.readStored(header.id).catch(() => undefined))?.events ?? [])
  return {
    childId: header.id,
    parentId: header.parentSession!,
    depth,
    provider: descriptor.provider,
    label: descriptor.label,
    state: running(header.id) ? 'running' : 'idle',
    turns,
    local: descriptor.remote === undefined,
  }
}

function countTurns(events: Iterable<{ type: string }>): number {
  let turns = 0
  for (const event of events) if (event.type === 'turn/start') turns++
  return turns
}
