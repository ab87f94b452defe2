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

/** One session of a delegation tree with its own usage, in tree order. */
export interface SessionUsageRow {
  header: SessionHeader
  /** 0 for the session asked about, 1 for its children, … */
  depth: number
  totals: UsageTotals
}

/**
 * A session's usage plus that of every descendant stored here, and each one's own (in
 * tree order, the session first). `children` must list each child once: a remote
 * continuable child's parent-side record and its own stored session are the same child,
 * and both carry its answers' usage (see `childrenOf` in `sessions.ts`).
 */
export async function treeUsage(
  id: string,
  children: ReadonlyMap<string, readonly SessionHeader[]>,
  read: (id: string) => Promise<StoredSession | undefined>,
  prices: PriceTable,
): Promise<{ totals: UsageTotals; sessions: number; rows: SessionUsageRow[] }> {
  const rows: SessionUsageRow[] = []
  let totals = emptyTotals()
  const visit = async (sessionId: string, depth: number, header: SessionHeader | undefined) => {
    const stored = await read(sessionId).catch(() => undefined)
    const own = sessionUsage(stored, prices)
    totals = mergeTotals(totals, own)
    const known = header ?? stored?.header
    if (known) rows.push({ header: known, depth, totals: own })
    for (const child of children.get(sessionId) ?? []) await visit(child.id, depth + 1, child)
  }
  await visit(id, 0, undefined)
  return { totals, sessions: Math.max(rows.length, 1), rows }
}

export function describeUsage(totals: UsageTotals, prices: PriceTable): string {
  return formatTotals(totals, Object.keys(prices).length > 0)
}
