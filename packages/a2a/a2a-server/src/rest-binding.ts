/**
 * What the HTTP+JSON binding asks of a server beyond the SDK's `restHandler`, as the
 * official conformance kit checks it: responses are `application/json` (the SDK labels
 * them `application/a2a+json`), and a request whose body is not JSON is refused with 415
 * `ContentTypeNotSupportedError` in the binding's error format (AIP-193:
 * `{ error: { code, status, message, details: [ErrorInfo] } }`) before it reaches the SDK.
 */
import { ContentTypeNotSupportedError } from '@a2a-js/sdk/errors'
import type { RequestHandler } from 'express'

const JSON_TYPES = /^application\/(a2a\+)?json\s*(;|$)/i

export function restBindingConventions(): RequestHandler {
  return (request, response, next) => {
    const setHeader = response.setHeader.bind(response)
    response.setHeader = ((name: string, value: number | string | readonly string[]) =>
      setHeader(name, name.toLowerCase() === 'content-type' && typeof value === 'string' ? value.replace(/^application\/a2a\+json/i, 'application/json') : value)) as typeof response.setHeader
    const hasBody = request.method === 'POST' || request.method === 'PUT' || request.method === 'PATCH'
    const type = request.headers['content-type']
    if (hasBody && Number(request.headers['content-length'] ?? 1) > 0 && !JSON_TYPES.test(type ?? '')) {
      const error = new ContentTypeNotSupportedError(`this binding takes JSON bodies (Content-Type: application/json), not ${JSON.stringify(type ?? 'none').slice(0, 80)}`)
      response.status(415).json({ error: { code: 415, status: 'INVALID_ARGUMENT', message: error.message, details: [error.toErrorInfo()] } })
      return
    }
    next()
  }
}
