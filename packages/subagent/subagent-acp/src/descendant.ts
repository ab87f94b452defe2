/**
 * A descendant of a `dsh acp` child, as the child names it: `_meta.dsh.descendant` on a
 * `tool_call_update` (`@dsh/acp-server`'s `descendants.ts` writes it) says an agent below
 * the child started or ended, with its id, helper and delegation path from the child. The
 * agent is untrusted: a field of the wrong shape drops the whole report (said to `dropped`).
 * The parent emits what it read as `subagent/descendant` (a `DescendantEvent`), which the
 * hooks plugin fires `SubagentStart`/`SubagentStop` from.
 */
import { isRecord } from '@dsh/base'

/** Longest id, helper or path element read; the deepest path read. */
const MAX_FIELD_CHARS = 200
const MAX_PATH = 32

export interface ReportedDescendant {
  event: 'start' | 'end'
  id: string
  /** Delegation names from the child down to the agent (`spawn "check"`). */
  path: string[]
  helper?: string
  stopReason?: string
}

/** Payload of `subagent/descendant`: a reported descendant and the remote child it came through. */
export interface DescendantEvent extends ReportedDescendant {
  /** The agent of this process that started the remote child. */
  parentId: string
  /** The remote child's provider, label and the parent's tool call that started it. */
  provider: string
  label?: string
  /** The remote child's helper, when a helper definition started it (how the broker names it too). */
  childHelper?: string
  callId?: string
}

export function readDescendant(meta: unknown, dropped: (reason: string) => void): ReportedDescendant | undefined {
  const dsh = isRecord(meta) ? meta.dsh : undefined
  const reported = isRecord(dsh) ? dsh.descendant : undefined
  if (reported === undefined) return undefined
  const short = (value: unknown): value is string => typeof value === 'string' && value.length > 0 && value.length <= MAX_FIELD_CHARS
  if (
    !isRecord(reported) ||
    (reported.event !== 'start' && reported.event !== 'end') ||
    !short(reported.id) ||
    !Array.isArray(reported.path) || reported.path.length === 0 || reported.path.length > MAX_PATH || !reported.path.every(short) ||
    (reported.helper !== undefined && !short(reported.helper)) ||
    (reported.stopReason !== undefined && !short(reported.stopReason))
  ) {
    dropped(`a _meta.dsh.descendant that is not { event: start|end, id, path: [names], helper?, stopReason? }: ${JSON.stringify(reported)?.slice(0, 200)}`)
    return undefined
  }
  return {
    event: reported.event,
    id: reported.id,
    path: reported.path as string[],
    ...(reported.helper !== undefined && { helper: reported.helper as string }),
    ...(reported.stopReason !== undefined && { stopReason: reported.stopReason as string }),
  }
}
