/**
 * A served delegation's descendants, named to a dsh parent in another process, one shape
 * on every wire (`dsh acp`'s `_meta.dsh.descendant`, `dsh a2a serve`'s
 * `metadata.dsh.descendants`, `dsh worker`'s `descendant` job events):
 *
 * `{ event: 'start' | 'end', id, path, helper?, stopReason? }`, `path` the delegation names
 * from the served agent down to the agent (`spawn "check"`, as the approval broker names
 * them).
 *
 * The served side follows its agents with `trackDescendants`; the parent's provider checks
 * each report with `readReportedDescendant` (the server is untrusted) and emits it as
 * `subagent/descendant` (a `DescendantEvent`), which the hooks plugin fires
 * `SubagentStart`/`SubagentStop` from: a root's hooks hear the whole tree.
 */
import type { Context } from 'cordis'
import { isRecord } from '@dsh/base'

/** Longest id, helper or path element read; the deepest path read. */
const MAX_FIELD_CHARS = 200
const MAX_PATH = 32
/** Descendants remembered per served agent (to find the branch a grandchild hangs under); the oldest are forgotten beyond it. */
const MAX_TRACKED = 1_024

export interface ReportedDescendant {
  event: 'start' | 'end'
  id: string
  /** Delegation names from the served agent down to the agent (`spawn "check"`). */
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

/** A delegation as the approval broker names it (`@dsh/approvals`' `delegationName`, passed in: this layer does not import it). */
export type DelegationNamer = (delegation: { provider: string; label?: string | undefined; helper?: string | undefined }) => string

/**
 * Check one report as a peer sent it; a field of the wrong shape drops the whole report
 * (said to `dropped`, naming `where` it was read).
 */
export function readReportedDescendant(reported: unknown, where: string, dropped: (reason: string) => void): ReportedDescendant | undefined {
  const short = (value: unknown): value is string => typeof value === 'string' && value.length > 0 && value.length <= MAX_FIELD_CHARS
  if (
    !isRecord(reported) ||
    (reported.event !== 'start' && reported.event !== 'end') ||
    !short(reported.id) ||
    !Array.isArray(reported.path) || reported.path.length === 0 || reported.path.length > MAX_PATH || !reported.path.every(short) ||
    (reported.helper !== undefined && !short(reported.helper)) ||
    (reported.stopReason !== undefined && !short(reported.stopReason))
  ) {
    dropped(`a ${where} that is not { event: start|end, id, path: [names], helper?, stopReason? }: ${JSON.stringify(reported)?.slice(0, 200)}`)
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

interface RunInfo {
  id: string
  parentId: string
  provider: string
  label?: string
  helper?: string
  callId?: string
  stopReason?: string
}

/**
 * Follow the agents below `servedId` in this process (`subagent/start` and `subagent/end`
 * at any depth, and the `subagent/descendant` a remote child of theirs named), telling
 * each as a report with its path from the served agent, and the served agent's tool call
 * its branch hangs under (`callId`, undefined when the child was started without one).
 * Returns the unsubscribe.
 */
export function trackDescendants(ctx: Context, servedId: string, name: DelegationNamer, tell: (descendant: ReportedDescendant, callId: string | undefined) => void): () => void {
  const branches = new Map<string, { callId: string | undefined; path: string[] }>()
  const on = ctx.on.bind(ctx) as unknown as (event: string, listener: (info: never) => void) => () => void
  const branchOf = (parentId: string, callId: string | undefined) => (parentId === servedId ? { callId, path: [] } : branches.get(parentId))
  const lifecycle = (event: 'start' | 'end') => (info: RunInfo) => {
    let branch = branches.get(info.id)
    if (branch === undefined) {
      const above = branchOf(info.parentId, info.callId)
      if (above === undefined) return
      branch = { callId: above.callId, path: [...above.path, name(info)] }
      branches.set(info.id, branch)
      if (branches.size > MAX_TRACKED) branches.delete(branches.keys().next().value!)
    }
    tell({ event, id: info.id, path: branch.path, ...(info.helper !== undefined && { helper: info.helper }), ...(event === 'end' && info.stopReason !== undefined && { stopReason: info.stopReason }) }, branch.callId)
  }
  const offs = [
    on('subagent/start', lifecycle('start')),
    on('subagent/end', lifecycle('end')),
    // A remote child of a descendant told its parent here of its own descendants: passed on.
    on('subagent/descendant', (info: DescendantEvent) => {
      const via = branchOf(info.parentId, info.callId)
      if (via === undefined) return
      // The child it came through is named as the broker names it (its own helper, not the descendant's).
      const path = [...via.path, name({ provider: info.provider, label: info.label, helper: info.childHelper }), ...info.path]
      tell({ event: info.event, id: info.id, path, ...(info.helper !== undefined && { helper: info.helper }), ...(info.stopReason !== undefined && { stopReason: info.stopReason }) }, via.callId)
    }),
  ]
  return () => {
    for (const off of offs) off()
  }
}
