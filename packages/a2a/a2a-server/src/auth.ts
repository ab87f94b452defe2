import { timingSafeEqual } from 'node:crypto'
import type { RequestHandler } from 'express'

/**
 * Every request (the agent card included) must carry `Authorization: Bearer <token>`;
 * others get 401 with a JSON body saying what is missing. Compared in constant time.
 */
export function requireBearer(token: string): RequestHandler {
  const expected = Buffer.from(`Bearer ${token}`)
  return (request, response, next) => {
    const given = Buffer.from(request.get('authorization') ?? '')
    if (given.length === expected.length && timingSafeEqual(given, expected)) return next()
    const why = given.length === 0 ? 'the request has no Authorization header' : 'the bearer token is wrong'
    response
      .status(401)
      .set('WWW-Authenticate', 'Bearer')
      .json({ error: `${why}; send Authorization: Bearer <token> with the token the worker was started with (dsh a2a serve --token-env NAME)` })
  }
}
