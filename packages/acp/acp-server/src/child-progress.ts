/**
 * A served session's children, shown to the editor while they work: each
 * `subagent/progress` of a child this session started from a tool call becomes a
 * `tool_call_update` on that call, whose content is the child's latest activity lines
 * (`↳ [label] bash: ls`, `↳ [label] writing…`). The service already coalesces progress per
 * run (`progressIntervalMs`), and one event makes at most one update, so the client never
 * hears more often than that. Once the call's own final update (its result) has gone out,
 * nothing more is sent for it: a background child outlives the call that started it.
 */
import { assertNever } from '@dsh/base'
import type { SessionUpdate as AcpSessionUpdate, ToolCallContent } from '@agentclientprotocol/sdk'
import type { Context } from 'cordis'
import { compactArgs as compactForDisplay, displayLine, type SubagentProgress, type SubagentUsage } from '@dsh/subagent'

/** Activity lines kept per tool call (the update replaces the call's content, so it shows the tail). */
export const MAX_ACTIVITY_LINES = 8

/** Longest argument text shown on a line, in terminal columns (an editor's tool card is a terminal-like, monospaced column). */
const MAX_ARGS = 80

export interface ChildProgressForwarder {
  /** The parent's tool call `callId` has had its final update: nothing more for it. */
  closeCall(callId: string): void
  /** Stop listening (the prompt is over). */
  dispose(): void
}

interface CallActivity {
  lines: string[]
  /** The last line is a `writing…` line, which more text does not repeat. */
  writing: boolean
}

/**
 * Forward the progress of `parentId`'s children to `send` for as long as the forwarder
 * lives. Only children with a `callId` (one-shot runs a tool started) are shown: a
 * continuable child's turn has no tool call of the parent to attach to, and a grandchild's
 * call is one the client never saw.
 */
export function forwardChildProgress(ctx: Context, parentId: string, send: (update: AcpSessionUpdate) => void): ChildProgressForwarder {
  const closed = new Set<string>()
  const activity = new Map<string, CallActivity>()
  const off = ctx.on('subagent/progress', (info) => {
    const { callId } = info
    if (info.parentId !== parentId || callId === undefined || closed.has(callId)) return
    const call = activity.get(callId) ?? { lines: [], writing: false }
    activity.set(callId, call)
    let changed = false
    // The label is the model's words: one clean line, as every other part of the activity.
    const who = displayLine(info.label ?? info.provider)
    for (const update of info.updates) changed = addActivity(call, update, who) || changed
    if (!changed) return
    const content: ToolCallContent[] = call.lines.map((text) => ({ type: 'content', content: { type: 'text', text } }))
    const usage = latestUsage(info.updates)
    send({
      sessionUpdate: 'tool_call_update',
      toolCallId: callId,
      content,
      _meta: { dsh: { subagent: { id: info.id, runId: info.runId, provider: info.provider, seq: info.seq, ...(info.label !== undefined && { label: info.label }), ...(usage && { usage }) } } },
    })
  })
  return {
    closeCall: (callId) => {
      closed.add(callId)
      activity.delete(callId)
    },
    dispose: () => off(),
  }
}

/** Add what `update` shows to the call's lines; whether anything changed. */
function addActivity(call: CallActivity, update: SubagentProgress, who: string): boolean {
  const push = (line: string, writing = false) => {
    call.lines.push(`↳ [${who}] ${line}`)
    if (call.lines.length > MAX_ACTIVITY_LINES) call.lines.splice(0, call.lines.length - MAX_ACTIVITY_LINES)
    call.writing = writing
    return true
  }
  switch (update.kind) {
    case 'text':
      return update.text.trim() !== '' && !call.writing ? push('writing…', true) : false
    case 'tool-start':
      return push(`${update.name}${update.args ? `: ${compactArgs(update.args)}` : ''}`)
    case 'tool-end':
      // The start already named the call; only a failure is worth a line of its own.
      return update.ok ? false : push(`${update.name} failed${update.detail ? `: ${update.detail}` : ''}`)
    case 'status':
      return push(update.text)
    case 'usage':
      // Carried in `_meta.dsh.subagent.usage` when something else changed, never a line.
      return false
    default:
      return assertNever(update, 'subagent progress')
  }
}

/** Arguments as an editor shows them: one line of at most 80 terminal columns (see `compactArgs` in `@dsh/subagent`). */
export function compactArgs(args: string): string {
  return compactForDisplay(args, MAX_ARGS)
}

function latestUsage(updates: readonly SubagentProgress[]): SubagentUsage | undefined {
  for (let i = updates.length - 1; i >= 0; i--) {
    const update = updates[i]
    if (update.kind === 'usage') return update.usage
  }
  return undefined
}
