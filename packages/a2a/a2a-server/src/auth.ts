import { timingSafeEqual } from 'node:crypto'
import type { RequestHandler } from 'express'

/**
 * Every request (the agent card included) must carry `Authorization: Bearer <token>`;
 * others get 401 with a JSON body saying what is missing. The scheme name is
 * case-insensitive (RFC 7235: `bearer`, `BEARER` are the same scheme); the token is
 * compared in constant time.
 */
export function requireBearer(token: string): RequestHandler {
  const expected = Buffer.from(token)
  return (request, response, next) => {
    const header = request.get('authorization') ?? ''
    const credentials = /^bearer +(.*)$/i.exec(header)?.[1]
    const given = Buffer.from(credentials ?? '')
    if (credentials !== undefined && given.length === expected.length && timingSafeEqual(given, expected)) return next()
    const why = header.length === 0 ? 'the request has no Authorization header' : credentials === undefined ? 'the Authorization header does not use the Bearer scheme' : 'the bearer token is wrong'
    response
      .status(401)
      .set('WWW-Authenticate', 'Bearer')
      .json({ error: `${why}; send Authorization: Bearer <token> with the token the worker was started with (dsh a2a serve --token-env NAME)` })
  }
}
