/**
 * Streamable HTTP: one endpoint, `/mcp`, on `node:http`, each client session (the SDK's
 * `Mcp-Session-Id`) a transport and a protocol server of its own, all sharing one
 * `McpServe`. Before the SDK sees a request: only requests addressed to this server by a
 * name it serves under (`hostRefusal` of `@dsh/base`: no DNS-rebinding page, no other
 * page's `Origin`) get past (403), and with a token only those carrying `Authorization:
 * Bearer <token>` (401), as `dsh a2a serve` has it. Without a token the server listens on
 * loopback only, and asks no approvals of its clients (any local process could be one).
 */
import { randomUUID } from 'node:crypto'
import { createServer, type IncomingMessage, type Server as HttpServer, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import type { Context } from 'cordis'
import { errorMessage, hostRefusal, servedHostNames } from '@dsh/base'
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js'
import { McpServerError } from './errors.js'
import { carriesBearer, interfaceHostNames, isLoopback, MAX_SESSIONS, MCP_PATH } from './http-access.js'
import { McpServe, type McpServeOptions } from './server.js'

export interface HttpServeOptions extends McpServeOptions {
  /** Default 127.0.0.1. Any other address needs `token`. */
  host?: string
  /** Default 0: a free port (read it from `url`). */
  port?: number
  /** The bearer token every request must carry. */
  token?: string
  /** Client sessions kept at once (default `MAX_SESSIONS`). */
  maxSessions?: number
}

export interface HttpServing {
  /** The endpoint's URL (`http://127.0.0.1:PORT/mcp`). */
  readonly url: string
  readonly serve: McpServe
  /** Client sessions kept now, and how many of them have a request in flight. */
  readonly sessions: { readonly open: number; readonly busy: number }
  /** Stop accepting, stop every call (each session flushed), close every connection. */
  close(): Promise<void>
}

export async function serveMcpOverHttp(ctx: Context, options: HttpServeOptions = {}): Promise<HttpServing> {
  const host = options.host ?? '127.0.0.1'
  const { token } = options
  if (token !== undefined && token.length === 0) throw new McpServerError('INVALID_OPTION', 'the token is empty; set a non-empty token or none')
  if (!token && !isLoopback(host)) throw new McpServerError('INSECURE_LISTEN', `refusing to listen on ${host} without a token: anyone who reaches it could run agents; pass --token-env NAME (a variable holding a bearer token) or listen on 127.0.0.1`)
  // Over HTTP the client answers the approval forms; without a token any local process can be that client.
  if (!token && (options.permission ?? 'ask') === 'ask') {
    throw new McpServerError('INSECURE_LISTEN', `refusing to ask approvals of HTTP clients without a token: any process on this machine could connect and approve its own commands; pass --token-env NAME (a variable holding a bearer token), or --permission reject (or allow) to have nobody asked`)
  }
  const serve = new McpServe(ctx, options)
  const maxSessions = options.maxSessions ?? MAX_SESSIONS
  if (!Number.isInteger(maxSessions) || maxSessions < 1) throw new McpServerError('INVALID_OPTION', `maxSessions must be a whole number of at least 1 (got ${String(maxSessions)})`)
  /** Live sessions in the order they were last used (a Map keeps insertion order: a use moves one to the end). */
  const sessions = new Map<string, Session>()
  let served: ReadonlySet<string> = new Set()
  const log = ctx.logger('mcp-server')

  const handle = async (request: IncomingMessage, response: ServerResponse): Promise<void> => {
    const refusal = hostRefusal(served, request.headers.host, request.headers.origin)
    if (refusal !== undefined) return refuse(request, response, 403, `${refusal}`)
    if (token !== undefined && !carriesBearer(request.headers.authorization, token)) {
      const header = request.headers.authorization
      const why = header === undefined ? 'the request has no Authorization header' : /^bearer /i.test(header) ? 'the bearer token is wrong' : 'the Authorization header does not use the Bearer scheme'
      response.setHeader('WWW-Authenticate', 'Bearer')
      return refuse(request, response, 401, `401 Unauthorized: ${why}; send Authorization: Bearer <token> with the token the server was started with (dsh mcp serve --token-env NAME)`)
    }
    if (new URL(request.url ?? '/', 'http://x').pathname !== MCP_PATH) return refuse(request, response, 404, `not found: the MCP endpoint is ${MCP_PATH}`)
    const sessionId = request.headers['mcp-session-id']
    if (typeof sessionId === 'string') {
      const session = sessions.get(sessionId)
      if (session === undefined) return refuse(request, response, 404, `no session ${JSON.stringify(sessionId.slice(0, 100))} here (it ended, made room for a newer one, or the server restarted); initialize a new one`)
      sessions.delete(sessionId)
      sessions.set(sessionId, session)
      return inFlight(session, response, () => session.transport.handleRequest(request, response))
    }
    if (request.method !== 'POST') return refuse(request, response, 400, 'a request without Mcp-Session-Id must be a POST of initialize')
    if (sessions.size >= maxSessions) {
      const idle = [...sessions.entries()].find(([, session]) => session.inFlight === 0)
      if (idle === undefined) return refuse(request, response, 503, `this server keeps at most ${maxSessions} sessions and every one has a request in flight; try again once one has ended`)
      sessions.delete(idle[0])
      await idle[1].transport.close()
    }
    const session: Session = { transport: undefined as unknown as StreamableHTTPServerTransport, inFlight: 0 }
    session.transport = new StreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      onsessioninitialized: (id) => void sessions.set(id, session),
    })
    session.transport.onclose = () => {
      const id = session.transport.sessionId
      if (id !== undefined && sessions.get(id) === session) sessions.delete(id)
    }
    await serve.connect(session.transport)
    await inFlight(session, response, () => session.transport.handleRequest(request, response))
  }

  const http = createServer((request, response) => {
    handle(request, response).catch((error: unknown) => {
      log.warn('an HTTP request failed: %s', errorMessage(error))
      if (!response.headersSent) refuse(request, response, 500, `the request failed: ${errorMessage(error)}`)
      else response.end()
    })
  })
  await listen(http, host, options.port ?? 0)
  const { port } = http.address() as AddressInfo
  // On a wildcard the server is addressed by this machine's addresses, and the URL shown is one of them.
  const reachedAs = interfaceHostNames(host, port)
  served = servedHostNames(host, port, reachedAs)
  const url = `http://${reachedAs[0] ?? `${host.includes(':') ? `[${host}]` : host}:${port}`}${MCP_PATH}`
  let closing: Promise<void> | undefined
  return {
    url,
    serve,
    get sessions() {
      return { open: sessions.size, busy: [...sessions.values()].filter((session) => session.inFlight > 0).length }
    },
    close: () => {
      closing ??= (async () => {
        const stopped = new Promise<void>((resolve) => http.close(() => resolve()))
        await serve.close()
        await Promise.allSettled([...sessions.values()].map((session) => session.transport.close()))
        http.closeAllConnections()
        await stopped
      })()
      return closing
    },
  }
}

interface Session {
  transport: StreamableHTTPServerTransport
  /** Requests of this session whose response has not ended (a call streaming its progress, an open GET stream). */
  inFlight: number
}

/** Count `response` as in flight for `session` until it ends (or its connection closes). */
async function inFlight(session: Session, response: ServerResponse, handle: () => Promise<void>): Promise<void> {
  session.inFlight++
  response.once('close', () => session.inFlight--)
  await handle()
}

/** A refusal as a JSON-RPC error body (what an MCP client reads), with the status; the request's body is not read. */
function refuse(request: IncomingMessage, response: ServerResponse, status: number, message: string): void {
  request.resume()
  response.writeHead(status, { 'content-type': 'application/json' })
  response.end(JSON.stringify({ jsonrpc: '2.0', id: null, error: { code: -32000, message } }))
}

function listen(http: HttpServer, host: string, port: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const onError = (error: NodeJS.ErrnoException) => reject(new McpServerError('LISTEN_FAILED', `cannot listen on ${host}:${port}: ${error.code ?? error.message}; choose another --host or --port`, { cause: error }))
    http.once('error', onError)
    http.listen(port, host, () => {
      http.off('error', onError)
      resolve()
    })
  })
}
