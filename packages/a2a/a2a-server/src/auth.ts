import { timingSafeEqual } from 'node:crypto'
import type { RequestHandler } from 'express'
import { hostRefusal } from '@dsh/base'

/** The credentials of an `Authorization: Bearer <token>` header (the scheme name in any case, RFC 7235). */
function bearerOf(header: string): string | undefined {
  return /^bearer +(.*)$/i.exec(header)?.[1]
}

/** Whether `header` is `Bearer <token>`, compared in constant time. */
export function carriesBearer(header: string | undefined, token: string): boolean {
  const credentials = bearerOf(header ?? '')
  if (credentials === undefined) return false
  const given = Buffer.from(credentials)
  const expected = Buffer.from(token)
  return given.length === expected.length && timingSafeEqual(given, expected)
}

/**
 * Every request but the agent card's must carry `Authorization: Bearer <token>` with one of
 * `tokens` (the server's token, and the approver's when there is one); others get 401. The
 * card is public, as the A2A protocol has it: it is how a client learns that a token is
 * needed (its `securitySchemes`), and it holds nothing the token guards. A request for the
 * card still passes `requireServedHost` first.
 *
 * The 401's body is in the shape the refused request's binding reads, so a client built on
 * the SDK reports why rather than "An unexpected error occurred.": a JSON-RPC error object
 * on the JSON-RPC endpoint, a `google.rpc.Status`-like `error` object on the HTTP+JSON one,
 * and `{ error }` elsewhere. Each says 401 and what is missing.
 */
export function requireBearer(paths: { card: string; jsonRpc: string; rest: string }, ...tokens: string[]): RequestHandler {
  return (request, response, next) => {
    if (request.path === paths.card) return next()
    const header = request.get('authorization') ?? ''
    if (tokens.some((token) => carriesBearer(header, token))) return next()
    const why = header.length === 0 ? 'the request has no Authorization header' : bearerOf(header) === undefined ? 'the Authorization header does not use the Bearer scheme' : 'the bearer token is wrong'
    const error = `401 Unauthorized: ${why}; send Authorization: Bearer <token> with the token the worker was started with (dsh a2a serve --token-env NAME)`
    // What was sent is not read: the refusal does not wait for a body it will not use.
    request.resume()
    response.status(401).set('WWW-Authenticate', 'Bearer')
    if (under(request.path, paths.jsonRpc)) return void response.json({ jsonrpc: '2.0', id: null, error: { code: UNAUTHENTICATED_CODE, message: error } })
    if (under(request.path, paths.rest)) return void response.json({ error: { code: 401, status: 'UNAUTHENTICATED', message: error } })
    response.json({ error })
  }
}

/**
 * The JSON-RPC error code of a refused token: one of the implementation-defined server
 * errors (-32000 to -32099) that A2A leaves unused, so the SDK's client keeps the message
 * (`JsonRpcTransportError`) rather than mapping it to an A2A error it is not.
 */
const UNAUTHENTICATED_CODE = -32050

/** Whether `path` is `base` or below it. */
function under(path: string, base: string): boolean {
  return path === base || path.startsWith(`${base}/`)
}

/**
 * Only requests addressed to this server by a name it serves under (`servedHostNames` of
 * `@dsh/base`): a DNS-rebinding page's `Host`, or another page's `Origin`, gets 403 with
 * the one line saying why, before anything else (the card included) is served.
 */
export function requireServedHost(names: () => ReadonlySet<string>): RequestHandler {
  return (request, response, next) => {
    const refusal = hostRefusal(names(), request.headers.host, request.headers.origin)
    if (refusal === undefined) return next()
    response.status(403).json({ error: `${refusal}; if clients reach this worker by another name, pass it as --public-url` })
  }
}
