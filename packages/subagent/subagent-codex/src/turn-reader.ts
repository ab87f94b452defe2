/**
 * One Codex turn read from its notifications, for the one-shot run and a continuable
 * conversation's turn alike: the answer's messages and streamed text, the model's last
 * error, the approvals declined, the turn's token usage, and the live progress a parent
 * is shown.
 *
 * | notification                                   | progress |
 * |------------------------------------------------|----------|
 * | `item/agentMessage/delta`                      | `text` |
 * | `item/completed` agentMessage whose text never streamed | `text` |
 * | `item/started` command, file change, MCP / dynamic / collab tool call, web search, image view or generation | `tool-start` |
 * | `item/completed` of one of those               | `tool-end` (ok unless failed, declined or a non-zero exit) |
 * | `thread/tokenUsage/updated`                    | `usage` (the turn's so far) |
 * | `turn/plan/updated`                            | `status`: `plan: 2/5 done — <the step in progress>` |
 * | `error` that Codex will retry (its model unreachable) | `status`: `codex: Reconnecting... 2/5: <why>` |
 *
 * Dropped and logged, never fatal: an item without a type or of an unknown type, an item
 * completed that never started, a second completion, malformed usage or plan.
 */
import { assertNever, type StopReason } from '@dsh/base'
import type { AssistantMessage } from '@dsh/llm'
import { selectOutput, summariseArgs, type ProgressReporter, type SubagentProgress, type SubagentResult, type SubagentUsage } from '@dsh/subagent'
import type { AppServerEvent } from './app-server-events.js'
import type { TokenCounts } from './progress-items.js'

type TurnCompleted = Extract<AppServerEvent, { type: 'turn-completed' }>

/** The thread's usage total as last reported: a notification that repeats it is no new model call. */
export interface UsageBaseline {
  total?: TokenCounts
}

function sameCounts(a: TokenCounts, b: TokenCounts): boolean {
  return a.inputTokens === b.inputTokens && a.outputTokens === b.outputTokens && a.cachedInputTokens === b.cachedInputTokens
}

/** Most tool calls remembered per turn (for `tool-end`); beyond it the oldest are forgotten. */
const MAX_OPEN_TOOL_CALLS = 256

export class CodexTurnReader {
  /** Texts of the completed agent messages, in order. */
  private readonly messages: string[] = []
  /** Every delta streamed. */
  private streamed = ''
  /** Whether the agent message being written streamed any delta. */
  private streamingMessage = false
  /** Declined approvals and refused requests, for the diagnostic. */
  private readonly notes: string[] = []
  private lastError: string | undefined
  private usage: SubagentUsage | undefined
  /** Codex's retries of its model since the model last answered anything: how many, since when, and the last one's words. */
  private retries = 0
  private firstRetryAt = 0
  private lastRetry: string | undefined
  private readonly openTools = new Map<string, { name: string; ended: boolean }>()

  constructor(
    private readonly target: ProgressReporter,
    /** Told why a progress notification was dropped. */
    private readonly dropped: (reason: string) => void,
    /** The thread's latest usage total, shared by the turns of one conversation. */
    private readonly baseline: UsageBaseline = {},
  ) {}

  /** Fold one event of this turn in; returns the event when it ends the turn. */
  read(event: AppServerEvent): TurnCompleted | undefined {
    // Anything the model sent means it was reached.
    if (event.type === 'agent-message-delta' || event.type === 'agent-message' || event.type === 'tool-item' || event.type === 'token-usage') this.retries = 0
    switch (event.type) {
      case 'agent-message-delta':
        this.streamed += event.delta
        this.streamingMessage = true
        this.report({ kind: 'text', text: event.delta })
        return undefined
      case 'agent-message':
        this.messages.push(event.text)
        if (!this.streamingMessage && event.text) this.report({ kind: 'text', text: event.text })
        this.streamingMessage = false
        return undefined
      case 'tool-item':
        this.onTool(event)
        return undefined
      case 'token-usage': {
        // Codex re-sends the latest call's usage unchanged (with each rate-limit update, and
        // at the start of the next turn): only a notification whose thread total moved
        // reports a new model call.
        const previous = this.baseline.total
        this.baseline.total = event.total
        if (previous && sameCounts(previous, event.total)) return undefined
        // `last` is one model call's usage: the turn's is their sum.
        const usage = this.usage ?? { inputTokens: 0, outputTokens: 0, cachedInputTokens: 0 }
        usage.inputTokens += event.last.inputTokens
        usage.outputTokens += event.last.outputTokens
        usage.cachedInputTokens += event.last.cachedInputTokens
        this.usage = usage
        this.report({ kind: 'usage', usage: { ...usage } })
        return undefined
      }
      case 'plan': {
        const done = event.steps.filter((step) => step.status === 'completed').length
        const current = event.steps.find((step) => step.status === 'inProgress') ?? event.steps.find((step) => step.status === 'pending')
        if (event.steps.length > 0) this.report({ kind: 'status', text: `plan: ${done}/${event.steps.length} done${current ? ` — ${current.step}` : ''}` })
        return undefined
      }
      case 'dropped':
        this.dropped(event.reason)
        return undefined
      case 'error': {
        const text = event.details ? `${event.message}: ${event.details}` : event.message
        if (!event.willRetry) {
          this.lastError = errorText(text, event.info)
          return undefined
        }
        // Codex retries on its own, for as long as it takes when the network is gone: say so as it happens.
        if (this.retries++ === 0) this.firstRetryAt = Date.now()
        this.lastRetry = text
        this.report({ kind: 'status', text: `codex: ${text}` })
        return undefined
      }
      case 'turn-completed':
        return event
      default:
        return assertNever(event, 'app-server event')
    }
  }

  /** How many times in a row Codex has retried its model without an answer, for how long (ms), and the last retry's words. */
  get modelRetries(): { count: number; forMs: number; last: string | undefined } {
    return { count: this.retries, forMs: this.retries === 0 ? 0 : Date.now() - this.firstRetryAt, last: this.lastRetry }
  }

  /** A server request was answered; `note` says what was declined or refused. */
  note(note: string): void {
    this.notes.push(note)
  }

  /** Why a `failed` turn failed: its own error, else the last error reported, else a plain statement. */
  failureCause(event: TurnCompleted): string {
    return event.error ? errorText(event.error.message, event.error.info) : (this.lastError ?? 'codex reported the turn failed without an error')
  }

  /** The turn's result: output by the selection rule, `diagnostic` then the notes on one line, usage when reported. */
  result(stopReason: StopReason, diagnostic: string | undefined): SubagentResult {
    const output = selectOutput(
      this.messages.map((text): AssistantMessage => ({ role: 'assistant', content: [{ type: 'text', text }] })),
      this.streamed,
    )
    const lines = [diagnostic, ...this.notes].filter((line): line is string => !!line)
    const result: SubagentResult = { output, stopReason }
    if (lines.length > 0) result.diagnostic = lines.join('; ').replace(/\s+/g, ' ')
    if (this.usage) result.usage = { ...this.usage }
    return result
  }

  private onTool(event: Extract<AppServerEvent, { type: 'tool-item' }>): void {
    const { tool } = event
    const open = this.openTools.get(tool.id)
    if (event.phase === 'started') {
      if (open) return this.dropped(`item/started for ${JSON.stringify(tool.id)} a second time`)
      this.openTools.set(tool.id, { name: tool.name, ended: false })
      if (this.openTools.size > MAX_OPEN_TOOL_CALLS) this.openTools.delete(this.openTools.keys().next().value!)
      const start: SubagentProgress = { kind: 'tool-start', callId: tool.id, name: tool.name }
      if (tool.args !== undefined && this.target.reporting) start.args = summariseArgs(tool.args)
      return this.report(start)
    }
    if (!open) return this.dropped(`item/completed for ${JSON.stringify(tool.id)}, an item that never started`)
    if (open.ended) return this.dropped(`item/completed for ${JSON.stringify(tool.id)} a second time`)
    open.ended = true
    this.report(tool.detail === undefined || tool.ok ? { kind: 'tool-end', callId: tool.id, name: open.name, ok: tool.ok } : { kind: 'tool-end', callId: tool.id, name: open.name, ok: false, detail: tool.detail })
  }

  private report(update: SubagentProgress): void {
    if (this.target.reporting) this.target.report(update)
  }
}

export function errorText(message: string, info: string | undefined): string {
  return info ? `${info}: ${message}` : message
}
