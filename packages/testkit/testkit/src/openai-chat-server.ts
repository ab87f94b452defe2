import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http'
import { pause, startLoopbackServer, untilStopped, writeFlushed } from './loopback-server.js'
import { completionBody, errorBody, streamChunks, type AnswerContext, type FakeChatResponse } from './openai-chat-wire.js'

export interface RecordedRequest {
  method: string
  /** Path and query as requested, e.g. `/v1/chat/completions`. */
  path: string
  headers: IncomingHttpHeaders
  /** The JSON body, parsed; `undefined` when the body was not JSON. */
  body: unknown
  rawBody: string
  /**
   * Settles when the connection for this request closes; `completed` is false when it
   * closed before the answer was fully written (the client aborted, or a scripted drop).
   */
  closed: Promise<{ completed: boolean }>
}

export interface FakeOpenAIChat {
  /** Base URL for an OpenAI client: `http://127.0.0.1:PORT/v1`. */
  url: string
  port: number
  /** Every request received, in arrival order (also ones that got errors). */
  requests: RecordedRequest[]
  /** Answers for the next chat-completions requests, consumed first in, first out. */
  enqueue(...responses: FakeChatResponse[]): void
  /** How many scripted answers are still waiting. */
  readonly pending: number
  close(): Promise<void>
}

/**
 * A fake OpenAI chat-completions endpoint on 127.0.0.1 that speaks the real wire format:
 * `POST /v1/chat/completions` answers with SSE `chat.completion.chunk`s and `[DONE]` when
 * the body sets `stream: true`, else with a `chat.completion`. Each request consumes the
 * next scripted answer; with none left it answers 500 saying so.
 */
export async function startFakeOpenAIChat(script: FakeChatResponse[] = []): Promise<FakeOpenAIChat> {
  const queue = [...script]
  const requests: RecordedRequest[] = []

  const server = await startLoopbackServer(async (req, res, rawBody, stop) => {
    const body = parseJson(rawBody)
    let settle: (value: { completed: boolean }) => void = () => {}
    const closed = new Promise<{ completed: boolean }>((resolve) => (settle = resolve))
    res.on('close', () => settle({ completed: res.writableFinished }))
    requests.push({ method: req.method ?? 'GET', path: req.url ?? '/', headers: req.headers, body, rawBody, closed })

    if (!isChatCompletions(req)) {
      return sendError(res, 404, `fake OpenAI chat server: no route for ${req.method} ${req.url}; only POST /v1/chat/completions is served`)
    }
    if (!isRecord(body)) return sendError(res, 400, 'fake OpenAI chat server: the request body is not a JSON object')
    const answer = queue.shift()
    if (!answer) {
      return sendError(res, 500, `fake OpenAI chat server: no scripted response left for request #${requests.length} (POST ${req.url}); enqueue one before making the request`, 'fake_server_error')
    }

    if (answer.delayMs && !(await pause(answer.delayMs, stop))) return
    if (answer.status !== undefined || answer.error !== undefined) {
      const status = answer.status ?? 500
      return sendJson(res, status, errorBody(status, answer.error))
    }
    const ctx: AnswerContext = {
      requestNumber: requests.length,
      model: typeof body.model === 'string' ? body.model : 'fake-model',
      promptText: JSON.stringify(body.messages ?? ''),
    }
    if (body.stream === true) return streamAnswer(res, answer, ctx, includesUsage(body), stop)
    if (answer.dropAfterChunks !== undefined) return void res.destroy()
    if (answer.hangAfterChunks !== undefined) return untilStopped(stop)
    sendJson(res, 200, completionBody(answer, ctx))
  })

  return {
    url: `${server.origin}/v1`,
    port: server.port,
    requests,
    enqueue: (...responses) => void queue.push(...responses),
    get pending() {
      return queue.length
    },
    close: server.close,
  }
}

async function streamAnswer(res: ServerResponse, answer: FakeChatResponse, ctx: AnswerContext, includeUsage: boolean, stop: AbortSignal): Promise<void> {
  res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache', connection: 'keep-alive' })
  res.flushHeaders()
  const events = [...streamChunks(answer, ctx, includeUsage).map((chunk) => JSON.stringify(chunk)), '[DONE]']
  for (let sent = 0; sent <= events.length; sent++) {
    if (sent === answer.dropAfterChunks) return void res.destroy()
    if (sent === answer.hangAfterChunks) return untilStopped(stop)
    if (sent === events.length) break
    if (sent > 0 && answer.chunkDelayMs && !(await pause(answer.chunkDelayMs, stop))) return
    if (!(await writeFlushed(res, `data: ${events[sent]}\n\n`))) return
  }
  res.end()
}

function sendError(res: ServerResponse, status: number, message: string, type?: string): void {
  sendJson(res, status, errorBody(status, { message, type }))
}

function sendJson(res: ServerResponse, status: number, value: unknown): void {
  const text = JSON.stringify(value)
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) })
  res.end(text)
}

function isChatCompletions(req: IncomingMessage): boolean {
  const pathname = new URL(req.url ?? '/', 'http://127.0.0.1').pathname
  return req.method === 'POST' && pathname.endsWith('/chat/completions')
}

function includesUsage(body: Record<string, unknown>): boolean {
  const options = body.stream_options
  return isRecord(options) && options.include_usage === true
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
