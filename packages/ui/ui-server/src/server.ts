/**
 * `dsh ui`'s HTTP server (node:http, nothing else): the page, its JSON and one
 * server-sent-event stream saying which session changed. Every request must carry the
 * token (`?token=` or `Authorization: Bearer`), compared in constant time, so another
 * local user who finds the port cannot read the sessions. It listens on loopback unless
 * told otherwise (and then only with a token the caller chose). Ids in URLs are session
 * ids or refused: nothing outside the session directory is ever read.
 */
import { randomBytes, timingSafeEqual } from 'node:crypto'
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { isValidSessionId } from '@dsh/session-jsonl'
import { SessionIndex } from './index-of-sessions.js'
import { PAGE } from './page.js'
import { Views } from './views.js'

export interface UiOptions {
  sessionDir: string
  host?: string
  port?: number
  /** The token every request must carry; a random one when not given. */
  token?: string
}

export interface UiServer {
  /** The page's address, token included: what `dsh ui` prints. */
  readonly url: string
  close(): Promise<void>
}

const LOOPBACK = new Set(['127.0.0.1', '::1', 'localhost'])
/** How often an idle event stream sends a comment, so proxies and the page know it is alive. */
const HEARTBEAT_MS = 15_000

export class UiError extends Error {}

export async function serveUi(options: UiOptions): Promise<UiServer> {
  const host = options.host ?? '127.0.0.1'
  if (!LOOPBACK.has(host) && options.token === undefined) throw new UiError(`refusing to serve on ${host} without a token of your choosing (--token-env NAME); the sessions would be readable by anyone who can reach it`)
  const token = options.token ?? randomBytes(24).toString('hex')
  const index = new SessionIndex(options.sessionDir)
  await index.open()
  const views = new Views(index)
  const streams = new Set<ServerResponse>()
  const offChange = index.onChange((id) => {
    for (const stream of streams) stream.write(`event: changed\ndata: ${JSON.stringify({ id })}\n\n`)
  })

  const authorised = (request: IncomingMessage, url: URL): boolean => {
    const given = url.searchParams.get('token') ?? /^Bearer (\S+)$/.exec(request.headers.authorization ?? '')?.[1] ?? ''
    const a = Buffer.from(given)
    const b = Buffer.from(token)
    return a.length === b.length && timingSafeEqual(a, b)
  }

  const json = (response: ServerResponse, status: number, body: unknown) => {
    response.writeHead(status, { 'content-type': 'application/json; charset=utf-8', 'cache-control': 'no-store', 'x-content-type-options': 'nosniff' })
    response.end(JSON.stringify(body))
  }

  const server = createServer((request, response) => {
    const url = new URL(request.url ?? '/', 'http://ui.invalid')
    if (request.method !== 'GET') return json(response, 405, { error: 'only GET is served' })
    if (!authorised(request, url)) return json(response, 401, { error: 'this page needs the token dsh ui printed (…/?token=…)' })
    const path = url.pathname
    if (path === '/') {
      response.writeHead(200, {
        'content-type': 'text/html; charset=utf-8',
        'cache-control': 'no-store',
        // The page's own inline script and nothing else: no remote code, no framing.
        'content-security-policy': "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; img-src 'self' data:; frame-ancestors 'none'",
        'x-content-type-options': 'nosniff',
        'referrer-policy': 'no-referrer',
      })
      return response.end(PAGE)
    }
    if (path === '/api/runs') return json(response, 200, { runs: views.runs(), unreadable: index.unreadable() })
    const match = /^\/api\/(tree|transcript)\/([^/]+)$/.exec(path)
    if (match) {
      const id = decodeURIComponent(match[2]!)
      if (!isValidSessionId(id)) return json(response, 400, { error: 'not a session id' })
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
  return {
    url: `http://${shownHost}:${port}/?token=${token}`,
    close: async () => {
      offChange()
      index.close()
      for (const stream of streams) stream.end()
      await new Promise<void>((resolve) => server.close(() => resolve()))
    },
  }
}
