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
 * Every request (the agent card included) must carry `Authorization: Bearer <token>` with
 * one of `tokens` (the server's token, and the approver's when there is one); others get
 * 401 with a JSON body saying what is missing.
 */
export function requireBearer(...tokens: string[]): RequestHandler {
  return (request, response, next) => {
    const header = request.get('authorization') ?? ''
    if (tokens.some((token) => carriesBearer(header, token))) return next()
    const why = header.length === 0 ? 'the request has no Authorization header' : bearerOf(header) === undefined ? 'the Authorization header does not use the Bearer scheme' : 'the bearer token is wrong'
    response
      .status(401)
      .set('WWW-Authenticate', 'Bearer')
      .json({ error: `${why}; send Authorization: Bearer <token> with the token the worker was started with (dsh a2a serve --token-env NAME)` })
  }
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
