/**
 * `dsh ui`'s HTTP server (node:http, nothing else): the page, its JSON and one
 * server-sent-event stream saying what changed. Every request must carry the token,
 * compared in constant time, so another local user who finds the port cannot read the
 * sessions: a GET as `?token=` (the printed link) or `Authorization: Bearer`; the one kind
 * of POST, an answer to an approval request, only as `Authorization: Bearer`, which a link,
 * an image or a cross-site form cannot send. It listens on loopback unless told otherwise
 * (and then only with a token the caller chose). Ids in URLs are session ids or approval
 * ids or refused: nothing outside the session directory is ever read.
 */
import { randomBytes, timingSafeEqual } from 'node:crypto'
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { hostRefusal, isRecord, servedHostNames } from '@dsh/base'
import { isValidSessionId } from '@dsh/session-jsonl'
import { isAnswerDecision } from '@dsh/approvals'
import { SessionIndex, type IndexLimits } from './index-of-sessions.js'
import { PAGE_DECISIONS, type LiveRun, type PageDecision } from './live.js'
import { PAGE } from './page.js'
import { Views } from './views.js'

interface UiOptions {
  sessionDir: string
  host?: string
  port?: number
  /** The token every request must carry; a random one when not given. */
  token?: string
  /** The running process serving its own page (`dsh run --ui`): pending approvals, queued children, budget stops. */
  live?: LiveRun
  /** How much of the session files is read and held (`MAX_FILE_BYTES`, `MAX_TOTAL_BYTES` by default). */
  limits?: IndexLimits
}

export interface UiServer {
  /** The page's address, token included: what `dsh ui` prints. */
  readonly url: string
  close(): Promise<void>
}

const LOOPBACK = new Set(['127.0.0.1', '::1', 'localhost'])
/** How often an idle event stream sends a comment, so proxies and the page know it is alive. */
const HEARTBEAT_MS = 15_000
/** The largest answer body read: `{"decision":"allow-always"}` is 27 bytes. */
export const MAX_ANSWER_BYTES = 1024
/** An approval id as the broker makes them. */
const APPROVAL_ID = /^approval-\d{1,15}$/

export class UiError extends Error {}

/** A refusal of a request, as the status and the one line the client reads. */
class Refusal {
  constructor(
    readonly status: number,
    readonly error: string,
  ) {}
}

export async function serveUi(options: UiOptions): Promise<UiServer> {
  const host = options.host ?? '127.0.0.1'
  if (!LOOPBACK.has(host) && options.token === undefined) throw new UiError(`refusing to serve on ${host} without a token of your choosing (--token-env NAME); the sessions would be readable by anyone who can reach it`)
  const token = options.token ?? randomBytes(24).toString('hex')
  const { live } = options
  const index = new SessionIndex(options.sessionDir, options.limits)
  await index.open()
  const views = new Views(index, live)
  const streams = new Set<ServerResponse>()
  const send = (event: string, data: unknown) => {
    for (const stream of streams) stream.write(`event: ${event}\ndata: ${JSON.stringify(data)}\n\n`)
  }
  const offChange = index.onChange((id) => send('changed', { id }))
  const offLive = live?.onChange(() => send('live', {}))

  const matches = (given: string): boolean => {
    const a = Buffer.from(given)
    const b = Buffer.from(token)
    return a.length === b.length && timingSafeEqual(a, b)
  }
  const bearer = (request: IncomingMessage): string | undefined => /^Bearer (\S+)$/.exec(request.headers.authorization ?? '')?.[1]
  /** A read: the token from the link or the header. */
  const mayRead = (request: IncomingMessage, url: URL): boolean => matches(url.searchParams.get('token') ?? bearer(request) ?? '')
  /** A write: the header alone, never the link (a link, an image or a form elsewhere could carry it). */
  const mayWrite = (request: IncomingMessage): boolean => matches(bearer(request) ?? '')

  const json = (response: ServerResponse, status: number, body: unknown) => {
    response.writeHead(status, { 'content-type': 'application/json; charset=utf-8', 'cache-control': 'no-store', 'x-content-type-options': 'nosniff' })
    response.end(JSON.stringify(body))
  }

  let origin = ''
  /** The names this server is addressed by (`servedHostNames`), known once it listens. */
  let served: ReadonlySet<string> = new Set()
  const answerRoute = /^\/api\/approvals\/([^/]+)$/

  /** `POST /api/approvals/ID` `{"decision":"allow-once"|"allow-always"|"reject"}`: checked strictly, in this order. */
  const answer = async (request: IncomingMessage, path: string): Promise<{ status: number; body: unknown }> => {
    const match = answerRoute.exec(path)
    if (!match) throw new Refusal(405, 'only GET is served here; answers are POSTed to /api/approvals/ID')
    if (!mayWrite(request)) throw new Refusal(401, 'an answer needs the token in an Authorization: Bearer header (the token in the link is not accepted for answers)')
    // A browser names the page that sent a request: only this server's own page may answer (checked with Host for every request).
    if (!/^application\/json(\s*;\s*charset=utf-8)?$/i.test(request.headers['content-type'] ?? '')) throw new Refusal(415, 'an answer is a JSON body (Content-Type: application/json)')
    const id = decodeURIComponentSafe(match[1]!)
    if (id === undefined || !APPROVAL_ID.test(id)) throw new Refusal(400, 'not an approval id (approval-N)')
    const decision = answerOf(await readBody(request))
    if (!live) throw new Refusal(404, `no request ${id} here: this page is not served by a running dsh run --ui`)
    const outcome = live.answer(id, decision)
    if (!outcome.ok) throw new Refusal(outcome.status, outcome.error)
    return { status: 200, body: { id: outcome.id, decision: outcome.decision } }
  }

  const server = createServer((request, response) => {
    const url = new URL(request.url ?? '/', 'http://ui.invalid')
    const path = url.pathname
    // Addressed to this server by a name it serves under, from no other page: a DNS-rebinding page or another site is refused first.
    const misdirected = hostRefusal(served, request.headers.host, request.headers.origin)
    if (misdirected !== undefined) {
      request.resume()
      return json(response, 403, { error: misdirected })
    }
    if (request.method === 'POST') {
      answer(request, path).then(
        ({ status, body }) => json(response, status, body),
        (error: unknown) => {
          if (error instanceof Refusal) json(response, error.status, { error: error.error })
          else json(response, 500, { error: 'the answer could not be taken' })
          // What was not read of a refused body is dropped, not left for the socket.
          request.resume()
        },
      )
      return
    }
    if (request.method !== 'GET') return json(response, 405, { error: 'only GET is served (and POST of answers to /api/approvals/ID)' })
    if (!mayRead(request, url)) return json(response, 401, { error: 'this page needs the token dsh ui printed (…/?token=…)' })
    if (path === '/') {
      response.writeHead(200, {
        'content-type': 'text/html; charset=utf-8',
        'cache-control': 'no-store',
        // The page's own inline script and nothing else: no remote code, no framing.
        'content-security-policy': "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; img-src 'self' data:; frame-ancestors 'none'; form-action 'none'",
        'x-content-type-options': 'nosniff',
        'referrer-policy': 'no-referrer',
      })
      return response.end(PAGE)
    }
    if (path === '/api/runs') return json(response, 200, { runs: views.runs(), unreadable: index.unreadable() })
    if (path === '/api/approvals') return json(response, 200, { live: live !== undefined, answers: live?.answers === true, now: Date.now(), pending: live?.pending() ?? [] })
    if (answerRoute.test(path)) return json(response, 405, { error: 'answers are POSTed' })
    const match = /^\/api\/(tree|transcript)\/([^/]+)$/.exec(path)
    if (match) {
      const id = decodeURIComponentSafe(match[2]!)
      if (id === undefined || !isValidSessionId(id)) return json(response, 400, { error: 'not a session id' })
      const body = match[1] === 'tree' ? views.tree(id) : views.transcript(id)
      return body ? json(response, 200, body) : json(response, 404, { error: `no session ${id} here` })
    }
    if (path === '/api/events') {
      response.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-store', connection: 'keep-alive' })
      response.write(': connected\n\n')
      streams.add(response)
      const heartbeat = setInterval(() => response.write(': alive\n\n'), HEARTBEAT_MS)
      request.on('close', () => {
        clearInterval(heartbeat)
        streams.delete(response)
      })
      return
    }
    return json(response, 404, { error: 'not found' })
  })
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject)
    server.listen(options.port ?? 0, host, () => resolve())
  })
  const { port } = server.address() as AddressInfo
  const shownHost = host.includes(':') ? `[${host}]` : host
  origin = `http://${shownHost}:${port}`
  served = servedHostNames(host, port)
  return {
    url: `${origin}/?token=${token}`,
    close: async () => {
      offChange()
      offLive?.()
      index.close()
      for (const stream of streams) stream.end()
      server.closeAllConnections?.()
      await new Promise<void>((resolve) => server.close(() => resolve()))
    },
  }
}

function decodeURIComponentSafe(text: string): string | undefined {
  try {
    return decodeURIComponent(text)
  } catch {
    return undefined
  }
}

/** The body, at most `MAX_ANSWER_BYTES`; more is refused without reading on. */
function readBody(request: IncomingMessage): Promise<string> {
  const declared = Number(request.headers['content-length'])
  if (Number.isFinite(declared) && declared > MAX_ANSWER_BYTES) return Promise.reject(new Refusal(413, `an answer is at most ${MAX_ANSWER_BYTES} bytes`))
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = []
    let size = 0
    const onData = (chunk: Buffer) => {
      size += chunk.length
      if (size > MAX_ANSWER_BYTES) {
        request.off('data', onData)
        reject(new Refusal(413, `an answer is at most ${MAX_ANSWER_BYTES} bytes`))
        return
      }
      chunks.push(chunk)
    }
    request.on('data', onData)
    request.once('end', () => resolve(Buffer.concat(chunks).toString('utf8')))
    request.once('error', reject)
  })
}

/** `{"decision": …}` and nothing else. */
function answerOf(body: string): PageDecision {
  let parsed: unknown
  try {
    parsed = JSON.parse(body)
  } catch {
    throw new Refusal(400, 'the body is not JSON')
  }
  if (!isRecord(parsed)) throw new Refusal(400, 'the body must be a JSON object: {"decision": "allow-once" | "allow-always" | "reject"}')
  const extra = Object.keys(parsed).filter((key) => key !== 'decision')
  if (extra.length > 0) throw new Refusal(400, `unknown field ${JSON.stringify(extra[0]!.slice(0, 40))}: an answer has only "decision"`)
  const decision = parsed.decision
  if (!isAnswerDecision(decision)) throw new Refusal(400, `"decision" must be one of ${PAGE_DECISIONS.join(', ')}`)
  return decision
}
