/**
 * A fake Anthropic Messages API on 127.0.0.1 that speaks the real wire format, so the
 * real Claude Code binary (through the Claude Agent SDK) can be driven from a script.
 * `POST /v1/messages` consumes the next scripted answer; the rest of the API surface a
 * client may touch is answered without consuming anything, and every request is recorded.
 */
import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http'
import { pause, startLoopbackServer, untilStopped, writeFlushed } from './loopback-server.js'

/** The SSE event types of a streamed message, in the order the API sends them. */
export type FakeMessagesEventType = 'message_start' | 'ping' | 'content_block_start' | 'content_block_delta' | 'content_block_stop' | 'message_delta' | 'message_stop'

export interface FakeToolUse {
  /** Defaults to `toolu_fake_<request>_<index>`. */
  id?: string
  name: string
  /** A string is sent verbatim as the `partial_json` (so it may be invalid JSON); an object is JSON-encoded. */
  input: Record<string, unknown> | string
}

/** One scripted answer, consumed by one `POST /v1/messages`. */
export interface FakeMessagesResponse {
  /** Assistant text. A string streams as several `text_delta`s (about a word each); an array gives the exact deltas. */
  text?: string | string[]
  /** `tool_use` content blocks after the text; each streams its input as 2+ `input_json_delta`s. */
  toolUses?: FakeToolUse[]
  /** Defaults to `tool_use` with tool uses, else `end_turn`. */
  stopReason?: 'end_turn' | 'tool_use' | 'max_tokens' | 'stop_sequence' | 'refusal' | (string & {})
  /** Defaults to a rough estimate (characters / 4). */
  usage?: { inputTokens: number; outputTokens: number }
  /** Wait this long before answering at all (before the status line). */
  delayMs?: number
  /** Wait this long between stream events. */
  eventDelayMs?: number
  /** Answer with this HTTP status and an Anthropic error body (500 when only `error` is given). */
  status?: number
  error?: string | { type?: string; message: string }
  /** Leave these event types out of the stream (e.g. `content_block_stop`, to reproduce a broken stream). */
  omitEvents?: FakeMessagesEventType[]
  /** Destroy the socket after this many SSE events (0: right after the headers). Non-streaming: no answer at all. */
  dropAfterEvents?: number
  /** Stop after this many SSE events and hold the connection open until the client hangs up or `close()`. */
  hangAfterEvents?: number
}

/** A scripted answer, or a function that builds one from the request it answers. */
export type FakeMessagesAnswer = FakeMessagesResponse | ((request: RecordedAnthropicRequest) => FakeMessagesResponse)

export interface RecordedAnthropicRequest {
  method: string
  /** Path and query as requested, e.g. `/v1/messages?beta=true`. */
  path: string
  /** `messages` (a model request, consumes the script), `count_tokens`, or `other` (answered 404). */
  kind: 'messages' | 'count_tokens' | 'other'
  headers: IncomingHttpHeaders
  /** The JSON body, parsed; `undefined` when it was not JSON. */
  body: unknown
  rawBody: string
  /** Settles when the connection closes; `completed` is false when it closed before the answer was fully written. */
  closed: Promise<{ completed: boolean }>
}

export interface FakeAnthropicMessages {
  /** The value for `ANTHROPIC_BASE_URL`: `http://127.0.0.1:PORT`, no `/v1`. */
  url: string
  port: number
  /** Every request received, in arrival order, whatever its route. */
  requests: RecordedAnthropicRequest[]
  /** Only the `POST /v1/messages` requests. */
  readonly messageRequests: RecordedAnthropicRequest[]
  /** Answers for the next `POST /v1/messages`, consumed first in, first out. */
  enqueue(...answers: FakeMessagesAnswer[]): void
  /** Scripted answers not yet consumed. */
  readonly pending: number
  /** Resolves with the `count`-th `POST /v1/messages` (1-based) once it has arrived, e.g. to act while a turn is in flight. */
  messageRequest(count: number): Promise<RecordedAnthropicRequest>
  /** Stops listening and destroys open sockets (held-open streams included). */
  close(): Promise<void>
}

/**
 * Start the fake. A streaming request (`stream: true`) gets the full SSE sequence
 * (`message_start`, `ping`, per block `content_block_start` / `_delta`+ / `_stop`,
 * `message_delta` with the stop reason and usage, `message_stop`); the Claude Code
 * binary silently returns an empty result when `content_block_stop` is missing, which
 * `omitEvents` can reproduce. A non-streaming request gets the `message` JSON, since
 * clients fall back to it.
 */
export async function startFakeAnthropicMessages(script: FakeMessagesAnswer[] = []): Promise<FakeAnthropicMessages> {
  const queue = [...script]
  const requests: RecordedAnthropicRequest[] = []
  const messageRequests: RecordedAnthropicRequest[] = []
  const waiters: { count: number; resolve: (request: RecordedAnthropicRequest) => void }[] = []

  const server = await startLoopbackServer(async (req, res, rawBody, stop) => {
    const body = parseJson(rawBody)
    let settle: (value: { completed: boolean }) => void = () => {}
    const closed = new Promise<{ completed: boolean }>((resolve) => (settle = resolve))
    res.on('close', () => settle({ completed: res.writableFinished }))
    const recorded: RecordedAnthropicRequest = { method: req.method ?? 'GET', path: req.url ?? '/', kind: routeOf(req), headers: req.headers, body, rawBody, closed }
    requests.push(recorded)

    if (recorded.kind === 'other') {
      return sendError(res, 404, 'not_found_error', `fake Anthropic server: no route for ${req.method} ${req.url}; POST /v1/messages and /v1/messages/count_tokens are served`)
    }
    if (!isRecord(body)) return sendError(res, 400, 'invalid_request_error', 'fake Anthropic server: the request body is not a JSON object')
    if (recorded.kind === 'count_tokens') return sendJson(res, 200, { input_tokens: estimateTokens(promptText(body)) })

    messageRequests.push(recorded)
    for (const waiter of waiters.filter((waiter) => waiter.count <= messageRequests.length)) {
      waiters.splice(waiters.indexOf(waiter), 1)
      waiter.resolve(messageRequests[waiter.count - 1]!)
    }
    const next = queue.shift()
    if (!next) {
      return sendError(res, 500, 'api_error', `fake Anthropic server: no scripted response left for messages request #${messageRequests.length} (POST ${req.url}); enqueue one before making the request`)
    }
    const answer = typeof next === 'function' ? next(recorded) : next

    if (answer.delayMs && !(await pause(answer.delayMs, stop))) return
    if (answer.status !== undefined || answer.error !== undefined) {
      const status = answer.status ?? 500
      const detail = typeof answer.error === 'object' ? answer.error : { message: answer.error ?? `fake error (HTTP ${status})` }
      return sendError(res, status, detail.type ?? errorTypeFor(status), detail.message)
    }
    const ctx: AnswerContext = {
      requestNumber: messageRequests.length,
      model: typeof body.model === 'string' ? body.model : 'claude-fake',
      inputTokens: estimateTokens(promptText(body)),
    }
    if (body.stream === true) return streamAnswer(res, answer, ctx, stop)
    if (answer.dropAfterEvents !== undefined) return void res.destroy()
    if (answer.hangAfterEvents !== undefined) return untilStopped(stop)
    sendJson(res, 200, messageBody(answer, ctx))
  })

  return {
    url: server.origin,
    port: server.port,
    requests,
    messageRequests,
    enqueue: (...answers) => void queue.push(...answers),
    get pending() {
      return queue.length
    },
    messageRequest: (count) => {
      const arrived = messageRequests[count - 1]
      if (arrived) return Promise.resolve(arrived)
      return new Promise((resolve) => waiters.push({ count, resolve }))
    },
    close: server.close,
  }
}

interface AnswerContext {
  /** 1-based number of the messages request on this server. */
  requestNumber: number
  model: string
  inputTokens: number
}

type ContentBlock = { type: 'text'; text: string } | { type: 'tool_use'; id: string; name: string; input: unknown }

interface SseEvent {
  type: FakeMessagesEventType
  data: Record<string, unknown>
}

/** The SSE events of a streamed answer, with the `type` field repeated in each `data` as the API does. */
function messageEvents(answer: FakeMessagesResponse, ctx: AnswerContext): SseEvent[] {
  const event = (type: FakeMessagesEventType, data: Record<string, unknown> = {}): SseEvent => ({ type, data: { type, ...data } })
  const usage = usageOf(answer, ctx)
  const events: SseEvent[] = [
    event('message_start', {
      message: { ...messageHead(ctx), content: [], stop_reason: null, stop_sequence: null, usage: { input_tokens: usage.input_tokens, output_tokens: 1 } },
    }),
    event('ping'),
  ]
  let index = 0
  const text = deltasOf(answer.text)
  if (text.length > 0) {
    events.push(event('content_block_start', { index, content_block: { type: 'text', text: '' } }))
    for (const piece of text) events.push(event('content_block_delta', { index, delta: { type: 'text_delta', text: piece } }))
    events.push(event('content_block_stop', { index }))
    index++
  }
  for (const use of toolUsesOf(answer, ctx)) {
    events.push(event('content_block_start', { index, content_block: { type: 'tool_use', id: use.id, name: use.name, input: {} } }))
    for (const piece of jsonPieces(use.json)) events.push(event('content_block_delta', { index, delta: { type: 'input_json_delta', partial_json: piece } }))
    events.push(event('content_block_stop', { index }))
    index++
  }
  events.push(event('message_delta', { delta: { stop_reason: stopReasonOf(answer), stop_sequence: null }, usage: { output_tokens: usage.output_tokens } }))
  events.push(event('message_stop'))
  const omitted = new Set(answer.omitEvents ?? [])
  return events.filter((each) => !omitted.has(each.type))
}

/** The non-streaming `message` body. */
function messageBody(answer: FakeMessagesResponse, ctx: AnswerContext): Record<string, unknown> {
  const content: ContentBlock[] = []
  const text = deltasOf(answer.text).join('')
  if (text) content.push({ type: 'text', text })
  for (const use of toolUsesOf(answer, ctx)) content.push({ type: 'tool_use', id: use.id, name: use.name, input: parseJson(use.json) ?? {} })
  return { ...messageHead(ctx), content, stop_reason: stopReasonOf(answer), stop_sequence: null, usage: usageOf(answer, ctx) }
}

async function streamAnswer(res: ServerResponse, answer: FakeMessagesResponse, ctx: AnswerContext, stop: AbortSignal): Promise<void> {
  res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache', connection: 'keep-alive', 'request-id': `req_fake_${ctx.requestNumber}` })
  res.flushHeaders()
  const events = messageEvents(answer, ctx)
  for (let sent = 0; sent <= events.length; sent++) {
    if (sent === answer.dropAfterEvents) return void res.destroy()
    if (sent === answer.hangAfterEvents) return untilStopped(stop)
    if (sent === events.length) break
    if (sent > 0 && answer.eventDelayMs && !(await pause(answer.eventDelayMs, stop))) return
    const { type, data } = events[sent]!
    if (!(await writeFlushed(res, `event: ${type}\ndata: ${JSON.stringify(data)}\n\n`))) return
  }
  res.end()
}

function messageHead(ctx: AnswerContext) {
  return { id: `msg_fake_${ctx.requestNumber}`, type: 'message', role: 'assistant', model: ctx.model }
}

interface ResolvedToolUse {
  id: string
  name: string
  json: string
}

function toolUsesOf(answer: FakeMessagesResponse, ctx: AnswerContext): ResolvedToolUse[] {
  return (answer.toolUses ?? []).map((use, index) => ({
    id: use.id ?? `toolu_fake_${ctx.requestNumber}_${index}`,
    name: use.name,
    json: typeof use.input === 'string' ? use.input : JSON.stringify(use.input),
  }))
}

function stopReasonOf(answer: FakeMessagesResponse): string {
  return answer.stopReason ?? (answer.toolUses?.length ? 'tool_use' : 'end_turn')
}

function usageOf(answer: FakeMessagesResponse, ctx: AnswerContext): { input_tokens: number; output_tokens: number } {
  if (answer.usage) return { input_tokens: answer.usage.inputTokens, output_tokens: answer.usage.outputTokens }
  const output = deltasOf(answer.text).join('') + toolUsesOf(answer, ctx).map((use) => use.name + use.json).join('')
  return { input_tokens: ctx.inputTokens, output_tokens: Math.max(1, estimateTokens(output)) }
}

/** The error types the API uses for each status, so clients classify fake errors as they would real ones. */
function errorTypeFor(status: number): string {
  switch (status) {
    case 400:
      return 'invalid_request_error'
    case 401:
      return 'authentication_error'
    case 403:
      return 'permission_error'
    case 404:
      return 'not_found_error'
    case 413:
      return 'request_too_large'
    case 429:
      return 'rate_limit_error'
    case 529:
      return 'overloaded_error'
    default:
      return status >= 500 ? 'api_error' : 'invalid_request_error'
  }
}

function sendError(res: ServerResponse, status: number, type: string, message: string): void {
  sendJson(res, status, { type: 'error', error: { type, message } })
}

function sendJson(res: ServerResponse, status: number, value: unknown): void {
  const text = JSON.stringify(value)
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) })
  res.end(text)
}

/** Routes by pathname: the binary adds `?beta=true` to every call. */
function routeOf(req: IncomingMessage): RecordedAnthropicRequest['kind'] {
  if (req.method !== 'POST') return 'other'
  const pathname = new URL(req.url ?? '/', 'http://127.0.0.1').pathname.replace(/\/+$/, '')
  if (pathname === '/v1/messages') return 'messages'
  if (pathname === '/v1/messages/count_tokens') return 'count_tokens'
  return 'other'
}

function promptText(body: Record<string, unknown>): string {
  return JSON.stringify([body.system ?? '', body.messages ?? ''])
}

function estimateTokens(text: string): number {
  return Math.ceil(text.length / 4)
}

/** Splits text the way a model streams it: roughly a word per delta, and never a lone delta for 2+ characters. */
function deltasOf(text: string | string[] | undefined): string[] {
  if (text === undefined) return []
  if (Array.isArray(text)) return text.filter((piece) => piece.length > 0)
  const words = text.match(/\s*\S+\s*/g) ?? (text ? [text] : [])
  if (words.length === 1 && text.length > 1) {
    const middle = Math.ceil(text.length / 2)
    return [text.slice(0, middle), text.slice(middle)]
  }
  return words
}

/** The API streams tool input in several fragments; clients must concatenate them. */
function jsonPieces(json: string): string[] {
  if (json.length < 2) return json ? [json] : []
  const size = Math.ceil(json.length / 3)
  const pieces: string[] = []
  for (let at = 0; at < json.length; at += size) pieces.push(json.slice(at, at + size))
  return pieces
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text)
  } catch {
    // Not JSON (or empty, e.g. a GET): recorded as `undefined`; the route and body checks answer it.
    return undefined
  }
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}
