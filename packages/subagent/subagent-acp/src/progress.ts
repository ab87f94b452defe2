/**
 * What a parent hears of an ACP child while it works: its `session/update`s mapped onto
 * `SubagentProgress`, one turn at a time. The agent is untrusted: an update for a tool call
 * it never announced, a second end of one call, or a field of the wrong shape is dropped
 * and logged; nothing here can end or stall the run.
 *
 * | `session/update`                       | progress |
 * |----------------------------------------|----------|
 * | `agent_message_chunk` (text)           | `text` |
 * | `tool_call`                            | `tool-start` (name: `title`, else `kind`; `rawInput` summarised); also `tool-end` when it arrives already `completed`/`failed` |
 * | `tool_call_update` with status `completed` / `failed` | `tool-end` (ok / not ok; name from the matching `tool_call`) |
 * | `plan`                                 | `status`: `plan: 2/5 done — <the entry in progress, else the next pending one>` |
 *
 * Everything else (thoughts, the user's own chunks, commands, modes, …) is not progress.
 * Usage is not in the stream: `dsh acp` puts a turn's usage in the prompt response's
 * `_meta.dsh.usage` (`usageOfPromptResponse`).
 */
import { isRecord } from '@dsh/base'
import type { PromptResponse, SessionUpdate } from '@agentclientprotocol/sdk'
import { summariseArgs, type ProgressReporter, type SubagentProgress, type SubagentUsage } from '@dsh/subagent'

/** Most tool calls remembered per turn (for their names at `tool-end`); beyond it the oldest are forgotten. */
const MAX_OPEN_TOOL_CALLS = 256

type ToolCallState = { name: string; ended: boolean }

export class AcpProgressReader {
  private readonly toolCalls = new Map<string, ToolCallState>()

  constructor(
    private readonly target: ProgressReporter,
    /** Called with a readable reason for each update dropped. */
    private readonly dropped: (reason: string) => void,
  ) {}

  read(update: SessionUpdate): void {
    if (!this.target.reporting) return
    switch (update.sessionUpdate) {
      case 'agent_message_chunk':
        if (update.content.type === 'text' && update.content.text) this.target.report({ kind: 'text', text: update.content.text })
        return
      case 'tool_call':
        return this.started(update)
      case 'tool_call_update':
        return this.updated(update)
      case 'plan':
        return this.plan(update.entries)
      default:
        // Thoughts, the user's own chunks, commands, modes, usage windows, notices: not progress.
        return
    }
  }

  private started(call: Extract<SessionUpdate, { sessionUpdate: 'tool_call' }>): void {
    const { toolCallId } = call
    if (typeof toolCallId !== 'string' || !toolCallId) return this.dropped('a tool_call without a toolCallId')
    if (this.toolCalls.has(toolCallId)) return this.dropped(`a second tool_call for ${JSON.stringify(toolCallId)}`)
    const name = nameOf(call.title, call.kind)
    if (name === undefined) return this.dropped(`a tool_call ${JSON.stringify(toolCallId)} with neither a title nor a kind`)
    this.remember(toolCallId, { name, ended: false })
    const start: SubagentProgress = { kind: 'tool-start', callId: toolCallId, name }
    if (call.rawInput !== undefined) start.args = summariseArgs(call.rawInput)
    this.target.report(start)
    // An agent may announce a call that already ran.
    if (call.status === 'completed' || call.status === 'failed') this.ended(toolCallId, call.status === 'completed')
  }

  private updated(update: Extract<SessionUpdate, { sessionUpdate: 'tool_call_update' }>): void {
    const { toolCallId, status } = update
    const known = this.toolCalls.get(toolCallId)
    if (!known) return this.dropped(`a tool_call_update for ${JSON.stringify(toolCallId)}, a tool call never announced`)
    if (status !== 'completed' && status !== 'failed') return
    this.ended(toolCallId, status === 'completed')
  }

  private ended(toolCallId: string, ok: boolean): void {
    const known = this.toolCalls.get(toolCallId)
    if (!known) return
    if (known.ended) return this.dropped(`a second end of tool call ${JSON.stringify(toolCallId)}`)
    known.ended = true
    this.target.report({ kind: 'tool-end', callId: toolCallId, name: known.name, ok })
  }

  private plan(entries: Extract<SessionUpdate, { sessionUpdate: 'plan' }>['entries']): void {
    if (entries.length === 0) return
    const done = entries.filter((entry) => entry.status === 'completed').length
    const current = entries.find((entry) => entry.status === 'in_progress') ?? entries.find((entry) => entry.status === 'pending')
    this.target.report({ kind: 'status', text: `plan: ${done}/${entries.length} done${current ? ` — ${current.content}` : ''}` })
  }

  private remember(toolCallId: string, state: ToolCallState): void {
    this.toolCalls.set(toolCallId, state)
    if (this.toolCalls.size > MAX_OPEN_TOOL_CALLS) this.toolCalls.delete(this.toolCalls.keys().next().value!)
  }
}

function nameOf(title: unknown, kind: unknown): string | undefined {
  if (typeof title === 'string' && title.trim()) return title.trim()
  if (typeof kind === 'string' && kind) return kind
  return undefined
}

/**
 * The turn's usage `dsh acp` reports in the prompt response's `_meta.dsh.usage`
 * (`{ inputTokens, outputTokens, cachedInputTokens }`, whole non-negative numbers), or
 * `undefined` when the agent reports none or reports it malformed (then `dropped` says so).
 */
export function usageOfPromptResponse(response: PromptResponse, dropped: (reason: string) => void): SubagentUsage | undefined {
  const dsh = isRecord(response._meta) ? response._meta.dsh : undefined
  const usage = isRecord(dsh) ? dsh.usage : undefined
  if (usage === undefined) return undefined
  if (isRecord(usage) && isCount(usage.inputTokens) && isCount(usage.outputTokens) && isCount(usage.cachedInputTokens) && usage.cachedInputTokens <= usage.inputTokens) {
    return { inputTokens: usage.inputTokens, outputTokens: usage.outputTokens, cachedInputTokens: usage.cachedInputTokens }
  }
  dropped(`a prompt response whose _meta.dsh.usage is not { inputTokens, outputTokens, cachedInputTokens } in whole tokens: ${JSON.stringify(usage)?.slice(0, 200)}`)
  return undefined
}

function isCount(value: unknown): value is number {
  return typeof value === 'number' && Number.isSafeInteger(value) && value >= 0
}
