/**
 * The delegation record `@dsh/tool-subagent` puts on a delegation call's `tool/result`
 * (`record.delegation`, its `DelegationRecord`): which child answered, through which
 * provider, and whether it is a session of this process. Read here once for `dsh ui` and
 * `dsh sessions`; a record that is not of this shape is no delegation.
 *
 * Only `@dsh/base` and types are imported: `dsh sessions` loads this module (through
 * `@dsh/ui-server/delegations`) without the server.
 */
import { isRecord } from '@dsh/base'
import type { SessionEvent } from '@dsh/session'

export interface DelegationOfResult {
  /** The child's id; a remote child's is `<provider>:<its own id>`. */
  childId: string
  provider: string
  /** A session of the parent's process (spawn, fork), stored beside it. */
  local: boolean
  /** Where a child that is not a session here keeps its record. */
  storedAt?: string
}

/** The delegation a tool result's record names, if it names one. */
export function delegationOf(record: Readonly<Record<string, unknown>> | undefined): DelegationOfResult | undefined {
  const delegation = record?.delegation
  if (!isRecord(delegation) || typeof delegation.childId !== 'string' || typeof delegation.provider !== 'string') return undefined
  return { childId: delegation.childId, provider: delegation.provider, local: delegation.local === true, ...(typeof delegation.storedAt === 'string' && { storedAt: delegation.storedAt }) }
}

/**
 * The call that asked for each child the parent's records name, by child id: the id as
 * recorded and, for a remote child, its own id too (a `dsh acp` child sharing the session
 * directory is stored under it, with no call id in its header).
 */
export function delegationCalls(events: readonly SessionEvent[]): Map<string, string> {
  const calls = new Map<string, string>()
  for (const event of events) {
    if (event.type !== 'tool/result') continue
    const delegation = delegationOf(event.record)
    if (!delegation) continue
    // The first record naming a child stands, as the page lists a child stored elsewhere once, by its first record.
    if (!calls.has(delegation.childId)) calls.set(delegation.childId, event.result.callId)
    const prefix = `${delegation.provider}:`
    const ownId = delegation.childId.startsWith(prefix) ? delegation.childId.slice(prefix.length) : undefined
    if (ownId !== undefined && !calls.has(ownId)) calls.set(ownId, event.result.callId)
  }
  return calls
}
