import { isRecord } from '@dsh/base'
import { type FinishReason, type LlmChunk, type ToolCallBlock, type Usage } from '@dsh/llm'
import type { ChatCompletionChunk } from 'openai/resources/chat/completions'
import { OpenAIChatError } from './errors.js'

interface PartialCall {
  id: string
  name: string
  args: string
}

/**
 * Turns the chunks of one streamed response into dsh chunks. Text and reasoning pass
 * straight through; tool calls arrive in fragments keyed by `index` and are handed on
 * whole when the model says it has finished; usage and the finish reason come last.
 *
 * The chunks are wire data the SDK types but does not check, so every field is read
 * defensively: a provider that omits or mistypes one must not crash the reader.
 */
export class ChunkReader {
  private calls = new Map<number, PartialCall>()
  private finishReason: FinishReason | undefined
  private usage: Usage | undefined

  /** `label` names the adapter in error messages. */
  constructor(private label: string) {}

  *read(chunk: ChatCompletionChunk): Generator<LlmChunk> {
    if (isRecord(chunk.usage)) this.usage = usageOf(chunk.usage)
    // We never ask for `n > 1`, so the first choice is the response.
    const choice = Array.isArray(chunk.choices) ? chunk.choices[0] : undefined
    if (!choice) return
    const delta: Record<string, unknown> = isRecord(choice.delta) ? choice.delta : {}

    const reasoning = reasoningOf(delta)
    if (reasoning) yield { type: 'reasoning-delta', text: reasoning }
    if (typeof delta.content === 'string' && delta.content) yield { type: 'text-delta', text: delta.content }
    if (Array.isArray(delta.tool_calls)) delta.tool_calls.forEach((fragment: unknown, position: number) => this.addFragment(fragment, position))

    if (typeof choice.finish_reason === 'string' && choice.finish_reason) {
      this.finishReason = this.finishReasonOf(choice.finish_reason)
      yield* this.completeCalls()
    }
  }

  /** After the last chunk: usage, then the finish reason. A stream that never said why it stopped was cut short. */
  *finish(): Generator<LlmChunk> {
    if (!this.finishReason) {
      throw new OpenAIChatError('INCOMPLETE_RESPONSE', `${this.label}: the response stream ended before the model finished (no finish_reason); the connection may have been cut`)
    }
    yield* this.completeCalls()
    if (this.usage) yield { type: 'usage', usage: this.usage }
    yield { type: 'finish', reason: this.finishReason }
  }

  private addFragment(fragment: unknown, position: number): void {
    if (!isRecord(fragment)) return
    // Some compatible servers omit `index` when they send one call per chunk.
    const index = typeof fragment.index === 'number' ? fragment.index : position
    const call = this.calls.get(index) ?? { id: '', name: '', args: '' }
    this.calls.set(index, call)
    // Ids and names are sent once by OpenAI but repeated by some servers: the first one wins.
    if (typeof fragment.id === 'string' && !call.id) call.id = fragment.id
    const fn = isRecord(fragment.function) ? fragment.function : {}
    if (typeof fn.name === 'string' && !call.name) call.name = fn.name
    if (typeof fn.arguments === 'string') call.args += fn.arguments
  }

  private *completeCalls(): Generator<LlmChunk> {
    const indices = [...this.calls.keys()].sort((a, b) => a - b)
    for (const index of indices) {
      const call = this.calls.get(index)!
      if (!call.name) throw new OpenAIChatError('INCOMPLETE_RESPONSE', `${this.label}: the model sent tool call #${index} without a function name`)
      yield { type: 'tool-call', call: toolCallOf(call, index) }
    }
    this.calls.clear()
  }

  private finishReasonOf(reason: string): FinishReason {
    switch (reason) {
      case 'stop':
        return 'stop'
      case 'tool_calls':
      case 'function_call':
        return 'tool-calls'
      case 'length':
        return 'length'
      case 'content_filter':
        return 'content-filter'
      default:
        // e.g. DeepSeek's `insufficient_system_resource`: the response is incomplete, not finished.
        throw new OpenAIChatError('INCOMPLETE_RESPONSE', `${this.label}: the model stopped with finish_reason "${reason}"`)
    }
  }
}

function toolCallOf(call: PartialCall, index: number): ToolCallBlock {
  // A call without an id cannot be answered; a synthetic one keeps the result pairable.
  const id = call.id || `call_${index}`
  // Parameterless tools are sometimes called with no argument text at all.
  if (!call.args.trim()) return { type: 'tool-call', id, name: call.name, args: {} }
  try {
    return { type: 'tool-call', id, name: call.name, args: JSON.parse(call.args) as unknown }
  } catch {
    // Not JSON: the tool layer reports it to the model, which needs the text it wrote.
    return { type: 'tool-call', id, name: call.name, args: undefined, rawArgs: call.args }
  }
}

/** DeepSeek sends `reasoning_content`; vLLM and OpenRouter name the same deltas `reasoning`. */
function reasoningOf(delta: Record<string, unknown>): string | undefined {
  for (const key of ['reasoning_content', 'reasoning']) {
    const value = delta[key]
    if (typeof value === 'string' && value) return value
  }
  return undefined
}

function usageOf(usage: Record<string, unknown>): Usage {
  const count = (value: unknown) => (typeof value === 'number' && Number.isFinite(value) ? value : 0)
  const cached = cacheHitsOf(usage)
  return { inputTokens: count(usage.prompt_tokens), outputTokens: count(usage.completion_tokens), ...(cached !== undefined && { cacheHitInputTokens: cached }) }
}

/**
 * Input tokens served from the provider's prefix cache: DeepSeek says
 * `prompt_cache_hit_tokens`, OpenAI `prompt_tokens_details.cached_tokens`.
 */
function cacheHitsOf(usage: Record<string, unknown>): number | undefined {
  const count = (value: unknown) => (typeof value === 'number' && Number.isInteger(value) && value >= 0 ? value : undefined)
  const details = usage.prompt_tokens_details
  return count(usage.prompt_cache_hit_tokens) ?? (isRecord(details) ? count(details.cached_tokens) : undefined)
}
