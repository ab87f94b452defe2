/**
 * What the fake Responses API can be told to answer, and how an answer becomes the real wire
 * shapes (the `response` object and its stream events). Pure functions: the server in
 * `openai-responses-server.ts` only decides when to write them.
 */
import { wordDeltas } from './stream-pieces.js'

export interface FakeFunctionCall {
  /** The `call_id` the client echoes in its `function_call_output`; defaults to `call_<request>_<index>`. */
  callId?: string
  name: string
  /** A string is sent verbatim (so it may be invalid JSON); anything else is JSON-encoded. */
  arguments: string | Record<string, unknown> | unknown[]
}

/** One scripted answer, consumed by one `POST …/responses`. */
export interface FakeResponsesAnswer {
  /** Assistant text. A string streams as several deltas (about a word each); an array gives the exact deltas. */
  text?: string | string[]
  /** Function calls, each a `function_call` output item after the text. */
  toolCalls?: FakeFunctionCall[]
  /** Defaults to a rough estimate (characters / 4). */
  usage?: { inputTokens: number; outputTokens: number }
  /** Wait this long before answering at all (before the status line). */
  delayMs?: number
  /** Wait this long between stream events. */
  eventDelayMs?: number
  /** Answer with this HTTP status and an OpenAI-style error body (default 500 when only `error` is given). */
  status?: number
  error?: string | { message: string; type?: string; code?: string | null }
  /** Stream a `response.failed` event (with this error) in place of `response.completed`. */
  failed?: string | { message: string; code?: string }
  /** End the stream cleanly but without `response.completed` (a dropped terminal event). */
  omitCompleted?: boolean
  /** Destroy the socket after this many SSE events (0: right after the headers). Non-streaming: no answer at all. */
  dropAfterEvents?: number
  /** Stop after this many SSE events and hold the connection open until the client or `close()` ends it. */
  hangAfterEvents?: number
}

/** One SSE event: the `event:` line carries `type`, the `data:` line the whole object. */
export interface ResponsesStreamEvent {
  type: string
  sequence_number: number
  [field: string]: unknown
}

type WireOutputItem =
  | { id: string; type: 'message'; status: 'in_progress' | 'completed'; role: 'assistant'; content: { type: 'output_text'; text: string; annotations: [] }[] }
  | { id: string; type: 'function_call'; status: 'in_progress' | 'completed'; call_id: string; name: string; arguments: string }

interface WireResponse {
  id: string
  object: 'response'
  created_at: number
  status: 'in_progress' | 'completed' | 'failed'
  model: string
  output: WireOutputItem[]
  error: { code: string; message: string } | null
  incomplete_details: null
  usage: WireResponsesUsage | null
}

interface WireResponsesUsage {
  input_tokens: number
  input_tokens_details: { cached_tokens: number }
  output_tokens: number
  output_tokens_details: { reasoning_tokens: number }
  total_tokens: number
}

/** Facts of the request an answer is built for. */
export interface AnswerContext {
  /** 1-based number of the request on this server. */
  requestNumber: number
  model: string
  /** Serialized `input` and `instructions`, for the default usage estimate. */
  promptText: string
}

/**
 * The events of a streamed answer in the order the real API sends them: `response.created`,
 * then per output item `output_item.added`, its deltas and `output_item.done`, then the
 * terminal `response.completed` (or `response.failed`, or nothing when it is dropped).
 */
export function streamEvents(answer: FakeResponsesAnswer, ctx: AnswerContext): ResponsesStreamEvent[] {
  const events: ResponsesStreamEvent[] = []
  const push = (type: string, fields: Record<string, unknown>) => events.push({ type, sequence_number: events.length, ...fields })
  const response = responseHead(ctx)
  push('response.created', { response: { ...response, status: 'in_progress', output: [], usage: null } })

  const items = outputItems(answer, ctx)
  items.forEach((item, outputIndex) => {
    if (item.type === 'message') {
      const pending = { ...item, status: 'in_progress', content: [] }
      push('response.output_item.added', { output_index: outputIndex, item: pending })
      push('response.content_part.added', { item_id: item.id, output_index: outputIndex, content_index: 0, part: { type: 'output_text', text: '', annotations: [] } })
      for (const delta of deltasOf(answer.text)) {
        push('response.output_text.delta', { item_id: item.id, output_index: outputIndex, content_index: 0, delta, logprobs: [] })
      }
      const text = item.content[0]?.text ?? ''
      push('response.output_text.done', { item_id: item.id, output_index: outputIndex, content_index: 0, text, logprobs: [] })
      push('response.content_part.done', { item_id: item.id, output_index: outputIndex, content_index: 0, part: item.content[0] })
    } else {
      push('response.output_item.added', { output_index: outputIndex, item: { ...item, status: 'in_progress', arguments: '' } })
      push('response.function_call_arguments.delta', { item_id: item.id, output_index: outputIndex, delta: item.arguments })
      push('response.function_call_arguments.done', { item_id: item.id, output_index: outputIndex, arguments: item.arguments })
    }
    push('response.output_item.done', { output_index: outputIndex, item })
  })

  if (answer.failed !== undefined) {
    const failure = typeof answer.failed === 'string' ? { message: answer.failed } : answer.failed
    push('response.failed', { response: { ...response, status: 'failed', output: items, error: { code: failure.code ?? 'server_error', message: failure.message } } })
  } else if (!answer.omitCompleted) {
    push('response.completed', { response: { ...response, status: 'completed', output: items, usage: usageOf(answer, ctx, items) } })
  }
  return events
}

/** The non-streaming form: the finished `response` object. */
export function finalResponse(answer: FakeResponsesAnswer, ctx: AnswerContext): WireResponse {
  const items = outputItems(answer, ctx)
  if (answer.failed !== undefined) {
    const failure = typeof answer.failed === 'string' ? { message: answer.failed } : answer.failed
    return { ...responseHead(ctx), status: 'failed', output: items, error: { code: failure.code ?? 'server_error', message: failure.message }, usage: null }
  }
  return { ...responseHead(ctx), status: 'completed', output: items, usage: usageOf(answer, ctx, items) }
}

function responseHead(ctx: AnswerContext): WireResponse {
  return {
    id: `resp_fake_${ctx.requestNumber}`,
    object: 'response',
    created_at: Math.floor(Date.now() / 1000),
    status: 'in_progress',
    model: ctx.model,
    output: [],
    error: null,
    incomplete_details: null,
    usage: null,
  }
}

function outputItems(answer: FakeResponsesAnswer, ctx: AnswerContext): WireOutputItem[] {
  const items: WireOutputItem[] = []
  const text = Array.isArray(answer.text) ? answer.text.join('') : answer.text
  if (text !== undefined) {
    items.push({ id: `msg_fake_${ctx.requestNumber}`, type: 'message', status: 'completed', role: 'assistant', content: [{ type: 'output_text', text, annotations: [] }] })
  }
  ;(answer.toolCalls ?? []).forEach((call, index) => {
    items.push({
      id: `fc_fake_${ctx.requestNumber}_${index}`,
      type: 'function_call',
      status: 'completed',
      call_id: call.callId ?? `call_${ctx.requestNumber}_${index}`,
      name: call.name,
      arguments: typeof call.arguments === 'string' ? call.arguments : JSON.stringify(call.arguments),
    })
  })
  return items
}

function usageOf(answer: FakeResponsesAnswer, ctx: AnswerContext, items: WireOutputItem[]): WireResponsesUsage {
  const estimate = (text: string) => Math.ceil(text.length / 4)
  const { inputTokens, outputTokens } = answer.usage ?? { inputTokens: estimate(ctx.promptText), outputTokens: estimate(JSON.stringify(items)) }
  return {
    input_tokens: inputTokens,
    input_tokens_details: { cached_tokens: 0 },
    output_tokens: outputTokens,
    output_tokens_details: { reasoning_tokens: 0 },
    total_tokens: inputTokens + outputTokens,
  }
}

/** Roughly a word per delta; unlike the chat fake, a lone word stays whole. */
function deltasOf(text: string | string[] | undefined): string[] {
  if (text === undefined) return []
  return Array.isArray(text) ? text : wordDeltas(text)
}
