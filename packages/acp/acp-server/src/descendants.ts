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
 * its path under that child (the tracker is `@dsh/subagent`'s, shared with the A2A and queue
 * workers). Other clients ignore `_meta` they do not know. Nothing goes out
 * for a call whose result has already gone (a background child outliving its call).
 */
import type { SessionUpdate as AcpSessionUpdate } from '@agentclientprotocol/sdk'
import { delegationName } from '@dsh/approvals'
import { trackDescendants } from '@dsh/subagent'
import type { Context } from 'cordis'

export function forwardDescendants(ctx: Context, sessionId: string, send: (update: AcpSessionUpdate) => void, isClosed: (callId: string) => boolean): () => void {
  // A branch started without a call has nothing to hang on: its agents are not named.
  return trackDescendants(ctx, sessionId, delegationName, (descendant, callId) => {
    if (callId === undefined || isClosed(callId)) return
    send({ sessionUpdate: 'tool_call_update', toolCallId: callId, _meta: { dsh: { descendant } } })
  })
}
