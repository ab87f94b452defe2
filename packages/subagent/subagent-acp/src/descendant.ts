/**
 * A descendant of a `dsh acp` child, as the child names it: `_meta.dsh.descendant` on a
 * `tool_call_update` (`@dsh/acp-server`'s `descendants.ts` writes it) says an agent below
 * the child started or ended, with its id, helper and delegation path from the child. The
 * agent is untrusted: a field of the wrong shape drops the whole report (said to `dropped`).
 * The parent emits what it read as `subagent/descendant` (a `DescendantEvent`), which the
 * hooks plugin fires `SubagentStart`/`SubagentStop` from.
 */
import { isRecord } from '@dsh/base'
import { readReportedDescendant, type ReportedDescendant } from '@dsh/subagent'

export type { DescendantEvent, ReportedDescendant } from '@dsh/subagent'

export function readDescendant(meta: unknown, dropped: (reason: string) => void): ReportedDescendant | undefined {
  const dsh = isRecord(meta) ? meta.dsh : undefined
  const reported = isRecord(dsh) ? dsh.descendant : undefined
  if (reported === undefined) return undefined
  return readReportedDescendant(reported, '_meta.dsh.descendant', dropped)
}
