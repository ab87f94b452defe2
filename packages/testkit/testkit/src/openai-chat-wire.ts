/**
 * What the fake chat-completions server can be told to answer, and how an answer becomes
 * the real wire shapes (`chat.completion`, `chat.completion.chunk`, error bodies). Pure
 * functions: the server in `openai-chat-server.ts` only decides when to write them.
 */
import type { ErrorDetail } from './scripted-endpoint.js'
import { jsonFragments, textDeltas } from './stream-pieces.js'

export type FakeFinishReason = 'stop' | 'length' | 'tool_calls' | 'content_filter' | (string & {})

export interface FakeToolCall {
  /** Defaults to `call_<request>_<index>`. */
  id?: string
  name: string
  /** A string is sent verbatim (so it may be invalid JSON); anything else is JSON-encoded. */
  arguments: string | Record<string, unknown> | unknown[]
}

/** One scripted answer, consumed by one `POST …/chat/completions`. */
export interface FakeChatResponse {
  /** Assistant text. A string streams as several deltas (about a word each); an array gives the exact deltas. */
  text?: string | string[]
  /** DeepSeek-style `reasoning_content`, streamed before the text; string or exact deltas as for `text`. */
  reasoning?: string | string[]
  /** Tool calls, streamed like the real API: id and name first, then the arguments in 2+ pieces. */
  toolCalls?: FakeToolCall[]
  /** Defaults to `tool_calls` when there are tool calls, else `stop`. */
  finishReason?: FakeFinishReason
  /** Defaults to a rough estimate (characters / 4). Sent in the last chunk only when the request sets `stream_options.include_usage`. */
  usage?: {
    promptTokens: number
    completionTokens: number
    /** Sent as DeepSeek's `prompt_cache_hit_tokens` (with `prompt_cache_miss_tokens`). */
    cacheHitTokens?: number
    /** Sent as OpenAI's `prompt_tokens_details.cached_tokens`. */
    cachedTokens?: number
  }
  /** Wait this long before answering at all (before the status line). */
  delayMs?: number
  /** Wait this long between stream chunks. */
  chunkDelayMs?: number
  /** Answer with this HTTP status and an OpenAI-style error body (default 500 when only `error` is given). */
  status?: number
  error?: string | { message: string; type?: string; code?: string | null }
  /** Extra headers of an error answer, e.g. `{ 'retry-after': '1' }`. */
  errorHeaders?: Record<string, string>
  /** Destroy the socket after this many `data:` events (0: right after the headers). Non-streaming: no answer at all. */
  dropAfterChunks?: number
  /** Stop writing after this many `data:` events and hold the connection open until the client or `close()` ends it. */
  hangAfterChunks?: number
}

/** Facts of the request an answer is built for. */
export interface AnswerContext {
  /** 1-based number of the request on this server. */
  requestNumber: number
  model: string
  /** Serialized `messages`, for the default usage estimate. */
  promptText: string
}

export interface WireUsage {
  prompt_tokens: number
  completion_tokens: number
  total_tokens: number
  prompt_cache_hit_tokens?: number
  prompt_cache_miss_tokens?: number
  prompt_tokens_details?: { cached_tokens: number }
}

export interface WireToolCallDelta {
  index: number
  id?: string
  type?: 'function'
  function: { name?: string; arguments: string }
}

export interface WireDelta {
  role?: 'assistant'
  content?: string | null
  reasoning_content?: string
  tool_calls?: WireToolCallDelta[]
}

export interface WireChunk {
  id: string
  object: 'chat.completion.chunk'
  created: number
  model: string
  choices: { index: number; delta: WireDelta; finish_reason: string | null; logprobs: null }[]
  usage?: WireUsage | null
}

export interface WireCompletion {
  id: string
  object: 'chat.completion'
  created: number
  model: string
  choices: {
    index: number
    message: {
      role: 'assistant'
      content: string | null
      reasoning_content?: string
      refusal: null
      tool_calls?: { id: string; type: 'function'; function: { name: string; arguments: string } }[]
    }
    finish_reason: string
    logprobs: null
  }[]
  usage: WireUsage
}

export interface WireError {
  error: { message: string; type: string; param: null; code: string | null }
}

/** The chunks of a streamed answer, without the closing `[DONE]`. */
export function streamChunks(answer: FakeChatResponse, ctx: AnswerContext, includeUsage: boolean): WireChunk[] {
  const head = { id: `chatcmpl-fake-${ctx.requestNumber}`, object: 'chat.completion.chunk' as const, created: nowSeconds(), model: ctx.model }
  const chunk = (delta: WireDelta, finishReason: string | null = null): WireChunk => ({
    ...head,
    choices: [{ index: 0, delta, finish_reason: finishReason, logprobs: null }],
    ...(includeUsage ? { usage: null } : {}),
  })

  const chunks = [chunk({ role: 'assistant', content: '' })]
  for (const piece of deltasOf(answer.reasoning)) chunks.push(chunk({ content: null, reasoning_content: piece }))
  for (const piece of deltasOf(answer.text)) chunks.push(chunk({ content: piece }))
  toolCallsOf(answer, ctx).forEach((call, index) => {
    chunks.push(chunk({ tool_calls: [{ index, id: call.id, type: 'function', function: { name: call.name, arguments: '' } }] }))
    for (const piece of jsonFragments(call.arguments)) chunks.push(chunk({ tool_calls: [{ index, function: { arguments: piece } }] }))
  })
  chunks.push(chunk({}, finishReasonOf(answer)))
  if (includeUsage) chunks.push({ ...head, choices: [], usage: usageOf(answer, ctx) })
  return chunks
}

export function completionBody(answer: FakeChatResponse, ctx: AnswerContext): WireCompletion {
  const text = joined(answer.text)
  const reasoning = joined(answer.reasoning)
  const calls = toolCallsOf(answer, ctx)
  return {
    id: `chatcmpl-fake-${ctx.requestNumber}`,
    object: 'chat.completion',
    created: nowSeconds(),
    model: ctx.model,
    choices: [
      {
        index: 0,
        message: {
          role: 'assistant',
          content: text || null,
          ...(reasoning ? { reasoning_content: reasoning } : {}),
          refusal: null,
          ...(calls.length ? { tool_calls: calls.map((call) => ({ id: call.id, type: 'function' as const, function: { name: call.name, arguments: call.arguments } })) } : {}),
        },
        finish_reason: finishReasonOf(answer),
        logprobs: null,
      },
    ],
    usage: usageOf(answer, ctx),
  }
}

/** The body shape the OpenAI API (and SDK) use for errors; both OpenAI fakes answer with it. */
export function errorBody(status: number, detail: ErrorDetail): WireError {
  return {
    error: {
      message: detail.message,
      type: detail.type ?? (status >= 500 ? 'server_error' : 'invalid_request_error'),
      param: null,
      code: detail.code ?? null,
    },
  }
}

interface ResolvedToolCall {
  id: string
  name: string
  arguments: string
}

function toolCallsOf(answer: FakeChatResponse, ctx: AnswerContext): ResolvedToolCall[] {
  return (answer.toolCalls ?? []).map((call, index) => ({
    id: call.id ?? `call_${ctx.requestNumber}_${index}`,
    name: call.name,
    arguments: typeof call.arguments === 'string' ? call.arguments : JSON.stringify(call.arguments),
  }))
}

function finishReasonOf(answer: FakeChatResponse): string {
  return answer.finishReason ?? (answer.toolCalls?.length ? 'tool_calls' : 'stop')
}

function usageOf(answer: FakeChatResponse, ctx: AnswerContext): WireUsage {
  const estimate = (text: string) => Math.ceil(text.length / 4)
  const output = joined(answer.reasoning) + joined(answer.text) + toolCallsOf(answer, ctx).map((call) => call.name + call.arguments).join('')
  const { promptTokens, completionTokens, cacheHitTokens, cachedTokens } = answer.usage ?? { promptTokens: estimate(ctx.promptText), completionTokens: estimate(output) }
  return {
    prompt_tokens: promptTokens,
    completion_tokens: completionTokens,
    total_tokens: promptTokens + completionTokens,
    ...(cacheHitTokens !== undefined && { prompt_cache_hit_tokens: cacheHitTokens, prompt_cache_miss_tokens: promptTokens - cacheHitTokens }),
    ...(cachedTokens !== undefined && { prompt_tokens_details: { cached_tokens: cachedTokens } }),
  }
}

function joined(text: string | string[] | undefined): string {
  return Array.isArray(text) ? text.join('') : (text ?? '')
}

function deltasOf(text: string | string[] | undefined): string[] {
  if (text === undefined) return []
  return Array.isArray(text) ? text : textDeltas(text)
}

function nowSeconds(): number {
  return Math.floor(Date.now() / 1000)
}
