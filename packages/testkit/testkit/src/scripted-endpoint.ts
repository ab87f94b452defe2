/**
 * The skeleton every fake model server shares: record each request, route it, check that its
 * body is a JSON object, take the next scripted answer, honour `delayMs` and scripted HTTP
 * errors, then stream SSE frames or send JSON. A vendor file describes only what differs (its
 * routes, its error body, its wire format) in an `EndpointDescription`.
 */
import type { IncomingHttpHeaders, OutgoingHttpHeaders, ServerResponse } from 'node:http'
import { isRecord, parseJson } from './json.js'
import { pause, startLoopbackServer, untilStopped, writeFlushed } from './loopback-server.js'

export interface RecordedRequest {
  method: string
  /** Path and query as requested, e.g. `/v1/chat/completions` or `/v1/messages?beta=true`. */
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

/** What an error body says before the vendor shapes it; a missing `type` follows the status, per vendor. */
export interface ErrorDetail {
  message: string
  type?: string
  code?: string | null
}

/** The fields every vendor's scripted answer has under the same names. */
export interface ScriptedAnswer {
  delayMs?: number
  status?: number
  error?: string | ErrorDetail
  /** Extra headers of an error answer (`retry-after`, `retry-after-ms`, …). */
  errorHeaders?: Record<string, string>
}

/** A queued answer, or a function that builds one from the request it answers. */
export type ScriptEntry<Answer, Recorded> = Answer | ((request: Recorded) => Answer)

/**
 * Where a request goes: `script` consumes the next answer; `fixed` answers JSON without
 * touching the script (side calls such as Anthropic's count_tokens); `none` gets a 404.
 */
export type Route = { to: 'script' } | { to: 'fixed'; answer(body: Record<string, unknown>): unknown } | { to: 'none' }

/** One request on the scripted route, as the vendor renders its answer. */
export interface Turn<Recorded> {
  request: Recorded
  body: Record<string, unknown>
  /** 1-based, counted as the description's `numbering` says; ids and error messages use it. */
  number: number
}

/** The stream knobs every vendor has under its own names (`…Chunks` for chat, `…Events` elsewhere). */
export interface Pacing {
  /** Destroy the socket after this many frames (0: right after the headers). Non-streaming: no answer at all. */
  dropAfter?: number
  /** Stop after this many frames and hold the connection until the client hangs up or `close()`. */
  hangAfter?: number
  /** Wait this long between frames. */
  gapMs?: number
}

export interface EndpointDescription<Answer extends ScriptedAnswer, Recorded extends RecordedRequest> {
  /** Starts every message the fake writes itself, e.g. `fake OpenAI chat server`. */
  label: string
  /** What a client puts after the origin in its base URL, e.g. `/v1`. */
  basePath: string
  /** The routes served, for the 404 message, e.g. `only POST /v1/chat/completions is served`. */
  served: string
  /** The record of a request, with the vendor's own fields added. */
  record(request: RecordedRequest, pathname: string): Recorded
  route(request: Recorded, pathname: string): Route
  /**
   * What a turn's number counts. The OpenAI fakes count every request the server got; the
   * Anthropic fake only the scripted ones, so Claude Code's side calls do not shift its ids.
   */
  numbering: 'every request' | 'scripted requests'
  /** The 500 for an empty queue: how it names the request, and its error type when the vendor's default for 500 will not do. */
  emptyQueue: { says(number: number): string; type?: string }
  errorBody(status: number, detail: ErrorDetail): unknown
  pacing(answer: Answer): Pacing
  /** Headers a stream adds to the SSE ones. */
  streamHeaders?(turn: Turn<Recorded>): OutgoingHttpHeaders
  /** The SSE frames for a request with `stream: true`, each ending in its blank line. */
  frames(answer: Answer, turn: Turn<Recorded>): string[]
  /** The JSON body for any other request. */
  finished(answer: Answer, turn: Turn<Recorded>): unknown
}

/** The handle every fake hands out. */
export interface ScriptedEndpoint<Answer, Recorded> {
  /** The origin plus the description's `basePath`. */
  url: string
  port: number
  /** Every request received, in arrival order (also ones that got errors). */
  requests: Recorded[]
  /** Answers for the next scripted requests, consumed first in, first out. */
  enqueue(...entries: ScriptEntry<Answer, Recorded>[]): void
  /** How many scripted answers are still waiting. */
  readonly pending: number
  /** Stops listening and destroys open sockets (held-open streams included). */
  close(): Promise<void>
}

/** The requests on the scripted route alone, for a vendor that hands them out (Anthropic's `messageRequests`). */
export interface ScriptedRequests<Recorded> {
  list: Recorded[]
  /** Resolves with the `count`-th (1-based) once it has arrived, e.g. to act while a turn is in flight. */
  nth(count: number): Promise<Recorded>
}

export async function startScriptedEndpoint<Answer extends ScriptedAnswer, Recorded extends RecordedRequest>(
  vendor: EndpointDescription<Answer, Recorded>,
  script: ScriptEntry<Answer, Recorded>[],
): Promise<{ endpoint: ScriptedEndpoint<Answer, Recorded>; scripted: ScriptedRequests<Recorded> }> {
  const queue = [...script]
  const requests: Recorded[] = []
  const scripted = trackScripted<Recorded>()
  const sendError = (res: ServerResponse, status: number, message: string, type?: string) =>
    sendJson(res, status, vendor.errorBody(status, { message: `${vendor.label}: ${message}`, type }))

  const server = await startLoopbackServer(async (req, res, rawBody, stop) => {
    const pathname = new URL(req.url ?? '/', 'http://127.0.0.1').pathname
    const request = vendor.record({ method: req.method ?? 'GET', path: req.url ?? '/', headers: req.headers, body: parseJson(rawBody), rawBody, closed: closedOf(res) }, pathname)
    requests.push(request)

    const route = vendor.route(request, pathname)
    if (route.to === 'none') return sendError(res, 404, `no route for ${req.method} ${req.url}; ${vendor.served}`)
    const body = request.body
    if (!isRecord(body)) return sendError(res, 400, 'the request body is not a JSON object')
    if (route.to === 'fixed') return sendJson(res, 200, route.answer(body))

    scripted.add(request)
    const number = vendor.numbering === 'every request' ? requests.length : scripted.list.length
    const entry = queue.shift()
    if (!entry) {
      return sendError(res, 500, `${vendor.emptyQueue.says(number)} (POST ${req.url}); enqueue one before making the request`, vendor.emptyQueue.type)
    }
    const answer = isAnswerBuilder(entry) ? entry(request) : entry

    if (answer.delayMs && !(await pause(answer.delayMs, stop))) return
    if (answer.status !== undefined || answer.error !== undefined) {
      const status = answer.status ?? 500
      const detail = typeof answer.error === 'object' ? answer.error : { message: answer.error ?? `fake error (HTTP ${status})` }
      return sendJson(res, status, vendor.errorBody(status, detail), answer.errorHeaders)
    }
    const turn: Turn<Recorded> = { request, body, number }
    const pacing = vendor.pacing(answer)
    if (body.stream === true) return writeFrames(res, vendor.frames(answer, turn), vendor.streamHeaders?.(turn), pacing, stop)
    if (pacing.dropAfter !== undefined) return void res.destroy()
    if (pacing.hangAfter !== undefined) return untilStopped(stop)
    sendJson(res, 200, vendor.finished(answer, turn))
  })

  const endpoint: ScriptedEndpoint<Answer, Recorded> = {
    url: `${server.origin}${vendor.basePath}`,
    port: server.port,
    requests,
    enqueue: (...entries) => void queue.push(...entries),
    get pending() {
      return queue.length
    },
    close: server.close,
  }
  return { endpoint, scripted }
}

function trackScripted<Recorded>(): ScriptedRequests<Recorded> & { add(request: Recorded): void } {
  const list: Recorded[] = []
  const waiters: { count: number; resolve: (request: Recorded) => void }[] = []
  return {
    list,
    add(request) {
      list.push(request)
      for (const waiter of waiters.filter((waiter) => waiter.count <= list.length)) {
        waiters.splice(waiters.indexOf(waiter), 1)
        waiter.resolve(list[waiter.count - 1]!)
      }
    },
    nth(count) {
      const arrived = list[count - 1]
      if (arrived) return Promise.resolve(arrived)
      return new Promise((resolve) => waiters.push({ count, resolve }))
    },
  }
}

/** Settles once the response's connection closes, saying whether the answer was written in full. */
function closedOf(res: ServerResponse): Promise<{ completed: boolean }> {
  return new Promise((resolve) => res.on('close', () => resolve({ completed: res.writableFinished })))
}

function isAnswerBuilder<Answer, Recorded>(entry: ScriptEntry<Answer, Recorded>): entry is (request: Recorded) => Answer {
  return typeof entry === 'function'
}

async function writeFrames(res: ServerResponse, frames: string[], headers: OutgoingHttpHeaders | undefined, pacing: Pacing, stop: AbortSignal): Promise<void> {
  res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache', connection: 'keep-alive', ...headers })
  // Headers go out before the first frame, so a client sees the stream open even when it hangs at 0.
  res.flushHeaders()
  for (let sent = 0; sent <= frames.length; sent++) {
    if (sent === pacing.dropAfter) return void res.destroy()
    if (sent === pacing.hangAfter) return untilStopped(stop)
    if (sent === frames.length) break
    if (sent > 0 && pacing.gapMs && !(await pause(pacing.gapMs, stop))) return
    if (!(await writeFlushed(res, frames[sent]!))) return
  }
  res.end()
}

function sendJson(res: ServerResponse, status: number, value: unknown, headers: OutgoingHttpHeaders = {}): void {
  const text = JSON.stringify(value)
  res.writeHead(status, { ...headers, 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) })
  res.end(text)
}
