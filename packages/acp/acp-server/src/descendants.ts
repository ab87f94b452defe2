/**
 * A served session's descendants, named to the parent: each `subagent/start` and
 * `subagent/end` of an agent below this session (a child one of its tool calls started, and
 * that child's own children, at any depth) is a `tool_call_update` on the session's call
 * that started the branch, carrying `_meta.dsh.descendant`:
 *
 * `{ event: 'start' | 'end', id, path, helper?, stopReason? }`, `path` the delegation names
 * from this session down to the agent (`spawn "check"`, `reviewer "look"`, as the approval
 * broker names them).
 *
 * A dsh parent (`@dsh/subagent-acp`) turns it into its `subagent/descendant` event, which the
 * parent's hooks fire `SubagentStart`/`SubagentStop` from: a root's hooks hear the whole tree.
 * A descendant a child of ours reported the same way (a `dsh acp` below us) is passed on with
 * its path under that child. Other clients ignore `_meta` they do not know. Nothing goes out
 * for a call whose result has already gone (a background child outliving its call).
 */
import type { SessionUpdate as AcpSessionUpdate } from '@agentclientprotocol/sdk'
import { delegationName } from '@dsh/approvals'
import type { Context } from 'cordis'

/** Descendants remembered per prompt (to find the call a grandchild hangs under); the oldest are forgotten beyond it. */
const MAX_TRACKED = 1_024

/** What a dsh parent's `@dsh/subagent-acp` emits as `subagent/descendant` for what it read. */
export interface DescendantEventInfo {
  /** The agent of the parent's process that started the remote child the event came through. */
  parentId: string
  /** That child's tool call, and how it is named (provider, label). */
  callId?: string
  provider: string
  label?: string
  /** That child's helper, when one started it. */
  childHelper?: string
  event: 'start' | 'end'
  id: string
  path: string[]
  helper?: string
  stopReason?: string
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

export function forwardDescendants(ctx: Context, sessionId: string, send: (update: AcpSessionUpdate) => void, isClosed: (callId: string) => boolean): () => void {
  const branches = new Map<string, { callId: string; path: string[] }>()
  const on = ctx.on.bind(ctx) as unknown as (event: string, listener: (info: never) => void) => () => void
  const tell = (callId: string, descendant: Record<string, unknown>) => {
    if (isClosed(callId)) return
    send({ sessionUpdate: 'tool_call_update', toolCallId: callId, _meta: { dsh: { descendant } } })
  }
  const lifecycle = (event: 'start' | 'end') => (info: RunInfo) => {
    let branch = branches.get(info.id)
    if (branch === undefined) {
      const above = info.parentId === sessionId ? (info.callId === undefined ? undefined : { callId: info.callId, path: [] }) : branches.get(info.parentId)
      if (above === undefined) return
      branch = { callId: above.callId, path: [...above.path, delegationName(info)] }
      branches.set(info.id, branch)
      if (branches.size > MAX_TRACKED) branches.delete(branches.keys().next().value!)
    }
    tell(branch.callId, { event, id: info.id, path: branch.path, ...(info.helper !== undefined && { helper: info.helper }), ...(event === 'end' && info.stopReason !== undefined && { stopReason: info.stopReason }) })
  }
  const offs = [
    on('subagent/start', lifecycle('start')),
    on('subagent/end', lifecycle('end')),
    // A dsh acp child of a descendant told its parent here of its own descendants: passed on.
    on('subagent/descendant', (info: DescendantEventInfo) => {
      const via = info.parentId === sessionId ? (info.callId === undefined ? undefined : { callId: info.callId, path: [] }) : branches.get(info.parentId)
      if (via === undefined) return
      // The child it came through is named as the broker names it (its own helper, not the descendant's).
      const path = [...via.path, delegationName({ provider: info.provider, label: info.label, helper: info.childHelper }), ...info.path]
      tell(via.callId, { event: info.event, id: info.id, path, ...(info.helper !== undefined && { helper: info.helper }), ...(info.stopReason !== undefined && { stopReason: info.stopReason }) })
    }),
  ]
  return () => {
    for (const off of offs) off()
  }
}
