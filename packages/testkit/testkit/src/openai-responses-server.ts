/**
 * A fake OpenAI Responses API endpoint (`POST {base}/v1/responses`) that speaks the real
 * wire format, so a real client (the Codex app-server, through its `wire_api =
 * "responses"` provider) can be driven from a script. The answer shapes and the server
 * live in one file because the server only decides *when* to write the events built here.
 */
import type { IncomingMessage, ServerResponse } from 'node:http'
import { pause, startLoopbackServer, untilStopped, writeFlushed } from './loopback-server.js'
import type { RecordedRequest } from './openai-chat-server.js'
import { errorBody } from './openai-chat-wire.js'

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

export interface FakeOpenAIResponses {
  /** Base URL for a client: `http://127.0.0.1:PORT/v1`. */
  url: string
  port: number
  /** Every request received, in arrival order (also ones that got errors). */
  requests: RecordedRequest[]
  /** Answers for the next responses requests, consumed first in, first out. */
  enqueue(...answers: FakeResponsesAnswer[]): void
  /** How many scripted answers are still waiting. */
  readonly pending: number
  close(): Promise<void>
}

/** One SSE event: the `event:` line carries `type`, the `data:` line the whole object. */
interface ResponsesStreamEvent {
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
interface AnswerContext {
  /** 1-based number of the request on this server. */
  requestNumber: number
  model: string
  /** Serialized `input` and `instructions`, for the default usage estimate. */
  promptText: string
}

/**
 * Starts the fake on 127.0.0.1. `POST` to a path ending in `/responses` consumes the next
 * scripted answer: SSE events when the body sets `stream: true`, else one JSON `response`
 * object. With no answer left it answers 500 saying so.
 */
export async function startFakeOpenAIResponses(script: FakeResponsesAnswer[] = []): Promise<FakeOpenAIResponses> {
  const queue = [...script]
  const requests: RecordedRequest[] = []

  const server = await startLoopbackServer(async (req, res, rawBody, stop) => {
    const body = parseJson(rawBody)
    let settle: (value: { completed: boolean }) => void = () => {}
    const closed = new Promise<{ completed: boolean }>((resolve) => (settle = resolve))
    res.on('close', () => settle({ completed: res.writableFinished }))
    requests.push({ method: req.method ?? 'GET', path: req.url ?? '/', headers: req.headers, body, rawBody, closed })

    if (!isResponsesRoute(req)) {
      return sendError(res, 404, `fake OpenAI Responses server: no route for ${req.method} ${req.url}; only POST /v1/responses is served`)
    }
    if (!isRecord(body)) return sendError(res, 400, 'fake OpenAI Responses server: the request body is not a JSON object')
    const answer = queue.shift()
    if (!answer) {
      return sendError(res, 500, `fake OpenAI Responses server: no scripted answer left for request #${requests.length} (POST ${req.url}); enqueue one before making the request`, 'fake_server_error')
    }

    if (answer.delayMs && !(await pause(answer.delayMs, stop))) return
    if (answer.status !== undefined || answer.error !== undefined) {
      const status = answer.status ?? 500
      return sendJson(res, status, errorBody(status, answer.error))
    }
    const ctx: AnswerContext = {
      requestNumber: requests.length,
      model: typeof body.model === 'string' ? body.model : 'fake-model',
      promptText: JSON.stringify([body.instructions ?? '', body.input ?? '']),
    }
    if (body.stream === true) return streamAnswer(res, answer, ctx, stop)
    if (answer.dropAfterEvents !== undefined) return void res.destroy()
    if (answer.hangAfterEvents !== undefined) return untilStopped(stop)
    sendJson(res, 200, finalResponse(answer, ctx))
  })

  return {
    url: `${server.origin}/v1`,
    port: server.port,
    requests,
    enqueue: (...answers) => void queue.push(...answers),
    get pending() {
      return queue.length
    },
    close: server.close,
  }
}

async function streamAnswer(res: ServerResponse, answer: FakeResponsesAnswer, ctx: AnswerContext, stop: AbortSignal): Promise<void> {
  res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache', connection: 'keep-alive' })
  res.flushHeaders()
  const events = streamEvents(answer, ctx)
  for (let sent = 0; sent <= events.length; sent++) {
    if (sent === answer.dropAfterEvents) return void res.destroy()
    if (sent === answer.hangAfterEvents) return untilStopped(stop)
    if (sent === events.length) break
    if (sent > 0 && answer.eventDelayMs && !(await pause(answer.eventDelayMs, stop))) return
    const event = events[sent]
    if (!(await writeFlushed(res, `event: ${event.type}\ndata: ${JSON.stringify(event)}\n\n`))) return
  }
  res.end()
}

/**
 * The events of a streamed answer in the order the real API sends them: `response.created`,
 * then per output item `output_item.added`, its deltas and `output_item.done`, then the
 * terminal `response.completed` (or `response.failed`, or nothing when it is dropped).
 */
function streamEvents(answer: FakeResponsesAnswer, ctx: AnswerContext): ResponsesStreamEvent[] {
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
function finalResponse(answer: FakeResponsesAnswer, ctx: AnswerContext): WireResponse {
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

/** Splits text the way a model streams it: roughly a word per delta. */
function deltasOf(text: string | string[] | undefined): string[] {
  if (text === undefined) return []
  if (Array.isArray(text)) return text
  return text.match(/\s*\S+\s*/g) ?? (text ? [text] : [])
}

function sendError(res: ServerResponse, status: number, message: string, type?: string): void {
  sendJson(res, status, errorBody(status, { message, type }))
}

function sendJson(res: ServerResponse, status: number, value: unknown): void {
  const text = JSON.stringify(value)
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) })
  res.end(text)
}

function isResponsesRoute(req: IncomingMessage): boolean {
  const pathname = new URL(req.url ?? '/', 'http://127.0.0.1').pathname
  return req.method === 'POST' && pathname.endsWith('/responses')
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text)
  } catch {
    // Not JSON (or empty, e.g. a GET): recorded as `undefined`; the route check answers it.
    return undefined
  }
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}
