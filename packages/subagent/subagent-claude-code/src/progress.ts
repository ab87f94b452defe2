/**
 * What a parent hears of a Claude Code child while it works: the Agent SDK's message
 * stream mapped onto `SubagentProgress`. Only the child's own (top-level) messages count;
 * those of Claude Code's own subagents (`parent_tool_use_id` set) are its business.
 *
 * | SDK message                                              | progress |
 * |----------------------------------------------------------|----------|
 * | `stream_event` `text_delta` (partial messages, asked for only while somebody listens) | `text` |
 * | `assistant` text block whose text did not stream          | `text` |
 * | `assistant` `tool_use` block                              | `tool-start` (input summarised) |
 * | `user` `tool_result` block                                | `tool-end` (ok unless `is_error`; name from the matching `tool_use`) |
 * | `result`                                                  | `usage` (see `usageOfResult`) |
 *
 * A tool result for a call never announced, or a second one, is dropped and logged.
 */
import type { SDKMessage, SDKResultMessage } from '@anthropic-ai/claude-agent-sdk'
import { errorMessage, isRecord } from '@dsh/base'
import { summariseArgs, type ProgressReporter, type SubagentUsage } from '@dsh/subagent'

/** Most tool calls remembered per run (for their names at `tool-end`); beyond it the oldest are forgotten. */
const MAX_OPEN_TOOL_CALLS = 256

export class ClaudeCodeProgressReader {
  private readonly toolCalls = new Map<string, { name: string; ended: boolean }>()
  /** Whether text of the assistant message being written arrived as deltas. */
  private streamedText = false

  constructor(
    private readonly target: ProgressReporter,
    /** Told why a message was dropped. */
    private readonly dropped: (reason: string) => void,
  ) {}

  /**
   * Map one SDK message. The messages are typed, not checked: a field a misbehaving child
   * leaves out must cost only that message's progress, never the run, so any failure to
   * read one is reported as a drop.
   */
  read(message: SDKMessage): void {
    if (!this.target.reporting) return
    try {
      this.readTyped(message)
    } catch (error) {
      this.dropped(`a malformed ${isRecord(message) && typeof message.type === 'string' ? message.type : 'untyped'} message (${errorMessage(error)})`)
    }
  }

  private readTyped(message: SDKMessage): void {
    switch (message.type) {
      case 'stream_event': {
        if (message.parent_tool_use_id !== null) return
        const { event } = message
        if (event.type === 'message_start') this.streamedText = false
        if (event.type === 'content_block_delta' && event.delta.type === 'text_delta' && event.delta.text) {
          this.streamedText = true
          this.target.report({ kind: 'text', text: event.delta.text })
        }
        return
      }
      case 'assistant':
        if (message.parent_tool_use_id !== null) return
        for (const block of message.message.content) {
          if (block.type === 'text' && block.text && !this.streamedText) this.target.report({ kind: 'text', text: block.text })
          else if (block.type === 'tool_use') this.toolStarted(block.id, block.name, block.input)
        }
        return
      case 'user': {
        if (message.parent_tool_use_id !== null) return
        const { content } = message.message
        if (!Array.isArray(content)) return
        for (const block of content) if (block.type === 'tool_result') this.toolEnded(block.tool_use_id, block.is_error === true)
        return
      }
      case 'result': {
        const usage = usageOfResult(message)
        if (usage) this.target.report({ kind: 'usage', usage })
        return
      }
      default:
        // System, status, hook, task and tool-progress messages: not progress a parent is shown.
        return
    }
  }

  private toolStarted(id: string, name: string, input: unknown): void {
    if (this.toolCalls.has(id)) return this.dropped(`a second tool_use ${JSON.stringify(id)}`)
    this.toolCalls.set(id, { name, ended: false })
    if (this.toolCalls.size > MAX_OPEN_TOOL_CALLS) this.toolCalls.delete(this.toolCalls.keys().next().value!)
    this.target.report({ kind: 'tool-start', callId: id, name, args: summariseArgs(input) })
  }

  private toolEnded(id: string, failed: boolean): void {
    const call = this.toolCalls.get(id)
    if (!call) return this.dropped(`a tool_result for ${JSON.stringify(id)}, a tool_use never seen`)
    if (call.ended) return this.dropped(`a second tool_result for ${JSON.stringify(id)}`)
    call.ended = true
    this.target.report({ kind: 'tool-end', callId: id, name: call.name, ok: !failed })
  }
}

/**
 * The run's usage from its `result` message (`usage`, the main loop's: a continuable
 * child's turn is one query, so it is that turn's). Every input token counts, cached
 * (`cache_read_input_tokens`) or written to the cache (`cache_creation_input_tokens`);
 * `undefined` when the counts are not whole numbers.
 */
export function usageOfResult(result: SDKResultMessage): SubagentUsage | undefined {
  const usage: unknown = result.usage
  if (!isRecord(usage)) return undefined
  const input = count(usage.input_tokens)
  const output = count(usage.output_tokens)
  const cacheRead = count(usage.cache_read_input_tokens ?? 0)
  const cacheWrite = count(usage.cache_creation_input_tokens ?? 0)
  if (input === undefined || output === undefined || cacheRead === undefined || cacheWrite === undefined) return undefined
  return { inputTokens: input + cacheRead + cacheWrite, outputTokens: output, cachedInputTokens: cacheRead }
}

function count(value: unknown): number | undefined {
  return typeof value === 'number' && Number.isSafeInteger(value) && value >= 0 ? value : undefined
}
