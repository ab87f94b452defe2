/**
 * Usage and cost of stored sessions for `dsh sessions show` and `tree`: the usage each
 * response recorded, summed per session and per delegation tree, priced by the config's
 * price table when there is one.
 */
import { addUsage, emptyTotals, formatTotals, mergeTotals, type PriceTable, type UsageTotals } from '@dsh/llm'
import type { SessionHeader, StoredSession } from '@dsh/session'

/** What one session's own responses used (a fork's seeded events are its parent's, not counted again). */
export function sessionUsage(stored: StoredSession | undefined, prices: PriceTable): UsageTotals {
  let totals = emptyTotals()
  for (const event of stored?.events ?? []) {
    if (event.type === 'assistant/message' && event.usage) totals = addUsage(totals, event.usage, prices)
  }
  return totals
}

/** A session's usage plus that of every descendant stored here. */
export async function treeUsage(
  id: string,
  children: ReadonlyMap<string, readonly SessionHeader[]>,
  read: (id: string) => Promise<StoredSession | undefined>,
  prices: PriceTable,
): Promise<{ totals: UsageTotals; sessions: number }> {
  let totals = sessionUsage(await read(id).catch(() => undefined), prices)
  let sessions = 1
  for (const child of children.get(id) ?? []) {
    const below = await treeUsage(child.id, children, read, prices)
    totals = mergeTotals(totals, below.totals)
    sessions += below.sessions
  }
  return { totals, sessions }
}

export function describeUsage(totals: UsageTotals, prices: PriceTable): string {
  return formatTotals(totals, Object.keys(prices).length > 0)
}
