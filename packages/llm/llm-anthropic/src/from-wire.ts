import { isRecord } from '@dsh/base'
import type { FinishReason, LlmChunk, ToolCallBlock, Usage } from '@dsh/llm'
import { AnthropicError } from './errors.js'

interface PartialToolUse {
  id: string
  name: string
  /** `input_json_delta` fragments joined; empty when the model sent none. */
  json: string
}

/** The token counts of a response: `message_start` gives them first, each `message_delta` the running totals. */
interface WireUsage {
  input: number
  output: number
  cacheRead: number | undefined
  cacheWrite: number | undefined
}

/**
 * Turns the events of one streamed Messages response into dsh chunks: text deltas pass
 * straight through (as do thinking deltas, as reasoning); a `tool_use` block's input
 * arrives as `input_json_delta` fragments and is handed on whole, parsed, at its
 * `content_block_stop`; usage and the finish reason come last, once `message_stop` said
 * the response is complete.
 *
 * The events are wire data the SDK types but does not check, so every field is read
 * defensively: a server that omits or mistypes one must not crash the reader.
 */
export class EventReader {
  private toolUses = new Map<number, PartialToolUse>()
  private stopReason: string | undefined
  private stopped = false
  private usage: WireUsage | undefined

  /** `label` names the adapter in error messages. */
  constructor(private label: string) {}

  *read(event: unknown): Generator<LlmChunk> {
    if (!isRecord(event)) return
    switch (event.type) {
      case 'message_start':
        if (isRecord(event.message) && isRecord(event.message.usage)) this.addUsage(event.message.usage)
        return
      case 'content_block_start':
        return yield* this.blockStart(event)
      case 'content_block_delta':
        return yield* this.blockDelta(event)
      case 'content_block_stop':
        return yield* this.blockStop(event)
      case 'message_delta':
        if (isRecord(event.delta) && typeof event.delta.stop_reason === 'string') this.stopReason = event.delta.stop_reason
        if (isRecord(event.usage)) this.addUsage(event.usage)
        return
      case 'message_stop':
        this.stopped = true
        return
      default:
        // Other and future event types carry nothing a dsh response holds.
        return
    }
  }

  /** After the last event: usage, then the finish reason. A stream that did not end its message was cut short. */
  *finish(): Generator<LlmChunk> {
    if (!this.stopped || this.stopReason === undefined) {
      const missing = this.stopReason === undefined ? 'no stop_reason' : 'no message_stop'
      throw new AnthropicError('INCOMPLETE_RESPONSE', `${this.label}: the response stream ended before the model finished (${missing}); the connection may have been cut`)
    }
    const open = [...this.toolUses.values()].map((use) => use.name || '(nameless)')
    if (open.length > 0) throw new AnthropicError('INCOMPLETE_RESPONSE', `${this.label}: the response ended with the tool call ${open.join(', ')} unfinished (no content_block_stop)`)
    const reason = this.finishReasonOf(this.stopReason)
    if (this.usage) yield { type: 'usage', usage: usageOf(this.usage) }
    yield { type: 'finish', reason }
  }

  private *blockStart(event: Record<string, unknown>): Generator<LlmChunk> {
    const block = event.content_block
    if (!isRecord(block) || typeof event.index !== 'number') return
    if (block.type === 'text' && typeof block.text === 'string' && block.text) yield { type: 'text-delta', text: block.text }
    if (block.type === 'tool_use') {
      // The input usually streams as fragments after an empty `{}`; a server may instead send it whole here.
      const whole = isRecord(block.input) && Object.keys(block.input).length > 0 ? JSON.stringify(block.input) : ''
      this.toolUses.set(event.index, { id: typeof block.id === 'string' ? block.id : '', name: typeof block.name === 'string' ? block.name : '', json: whole })
    }
  }

  private *blockDelta(event: Record<string, unknown>): Generator<LlmChunk> {
    const delta = event.delta
    if (!isRecord(delta)) return
    switch (delta.type) {
      case 'text_delta':
        if (typeof delta.text === 'string' && delta.text) yield { type: 'text-delta', text: delta.text }
        return
      case 'thinking_delta':
        if (typeof delta.thinking === 'string' && delta.thinking) yield { type: 'reasoning-delta', text: delta.thinking }
        return
      case 'input_json_delta': {
        const use = typeof event.index === 'number' ? this.toolUses.get(event.index) : undefined
        if (!use) throw new AnthropicError('BAD_RESPONSE', `${this.label}: input_json_delta for content block ${String(event.index)}, which is not a tool_use block`)
        if (typeof delta.partial_json === 'string') use.json += delta.partial_json
        return
      }
      default:
        return
    }
  }

  private *blockStop(event: Record<string, unknown>): Generator<LlmChunk> {
    if (typeof event.index !== 'number') return
    const use = this.toolUses.get(event.index)
    if (!use) return
    this.toolUses.delete(event.index)
    if (!use.name) throw new AnthropicError('INCOMPLETE_RESPONSE', `${this.label}: the model sent tool_use block ${event.index} without a tool name`)
    yield { type: 'tool-call', call: toolCallOf(use, event.index) }
  }

  private addUsage(usage: Record<string, unknown>): void {
    const count = (value: unknown) => (typeof value === 'number' && Number.isInteger(value) && value >= 0 ? value : undefined)
    const before = this.usage ?? { input: 0, output: 0, cacheRead: undefined, cacheWrite: undefined }
    // Every field is a running total; one the event leaves out or nulls keeps its last value.
    this.usage = {
      input: count(usage.input_tokens) ?? before.input,
      output: count(usage.output_tokens) ?? before.output,
      cacheRead: count(usage.cache_read_input_tokens) ?? before.cacheRead,
      cacheWrite: count(usage.cache_creation_input_tokens) ?? before.cacheWrite,
    }
  }

  private finishReasonOf(reason: string): FinishReason {
    switch (reason) {
      case 'end_turn':
      case 'stop_sequence':
        return 'stop'
      case 'tool_use':
        return 'tool-calls'
      case 'max_tokens':
      case 'model_context_window_exceeded':
        return 'length'
      case 'refusal':
        return 'content-filter'
      case 'pause_turn':
        // Only a server tool's long turn pauses, and dsh sends none: nothing here could resume it.
        throw new AnthropicError('INCOMPLETE_RESPONSE', `${this.label}: the model paused its turn (stop_reason "pause_turn"), which only server tools do and dsh sends none; the response is incomplete`)
      default:
        throw new AnthropicError('INCOMPLETE_RESPONSE', `${this.label}: the model stopped with stop_reason "${reason}", which dsh does not know`)
    }
  }
}

/**
 * A tool call from a finished `tool_use` block. The model's JSON must be an object (what
 * the API promises and every dsh tool takes); anything else keeps `args: undefined` and
 * the text in `rawArgs`, so the tool layer answers the model that its arguments were not
 * valid JSON, quoting them, and the turn goes on.
 */
function toolCallOf(use: PartialToolUse, index: number): ToolCallBlock {
  // A call without an id cannot be answered; a synthetic one keeps the result pairable.
  const id = use.id || `toolu_${index}`
  if (!use.json.trim()) return { type: 'tool-call', id, name: use.name, args: {} }
  try {
    const args: unknown = JSON.parse(use.json)
    if (isRecord(args) && !Array.isArray(args)) return { type: 'tool-call', id, name: use.name, args }
  } catch {
    // Not JSON: kept as text below.
  }
  return { type: 'tool-call', id, name: use.name, args: undefined, rawArgs: use.json }
}

/** dsh's `inputTokens` is every input token; Anthropic's `input_tokens` leaves out those read from and written to the cache. */
function usageOf(usage: WireUsage): Usage {
  return {
    inputTokens: usage.input + (usage.cacheRead ?? 0) + (usage.cacheWrite ?? 0),
    outputTokens: usage.output,
    ...(usage.cacheRead !== undefined && { cacheHitInputTokens: usage.cacheRead }),
    ...(usage.cacheWrite !== undefined && { cacheWriteInputTokens: usage.cacheWrite }),
  }
}
