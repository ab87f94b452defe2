import { LlmError } from '@dsh/llm'
import { APIConnectionError, APIConnectionTimeoutError, APIError, APIUserAbortError } from 'openai'

export type OpenAIChatErrorCode =
  /** The API key variable is unset or empty; the message names it. */
  | 'NO_API_KEY'
  /** The server answered with an HTTP error; `status` holds it, the message the server's text. */
  | 'HTTP_STATUS'
  /** No connection (refused, DNS, TLS). */
  | 'UNREACHABLE'
  /** No response headers within `timeoutMs`. */
  | 'TIMEOUT'
  /** A started stream sent nothing for `timeoutMs`. */
  | 'STALLED'
  /** The connection broke mid-response. */
  | 'CONNECTION_LOST'
  /** A stream event that is not JSON, or an error event inside the stream. */
  | 'BAD_STREAM'
  /** The stream ended without a usable finish (none, an unknown reason, a nameless tool call). */
  | 'INCOMPLETE_RESPONSE'

/** A failure of an OpenAI-compatible endpoint, with a stable `code` for callers that branch on it. */
export class OpenAIChatError extends LlmError {
  override name = 'OpenAIChatError'
  constructor(readonly code: OpenAIChatErrorCode, message: string, status?: number, options?: { cause?: unknown }) {
    super(message, status, options)
  }
}

/** What an error message needs to say where it came from. */
export interface ErrorContext {
  label: string
  baseURL: string
  apiKeyEnv: string
  timeoutMs: number
  /** The caller's signal: once it has aborted, whatever broke is reported as the abort. */
  signal: AbortSignal
  /** True when the adapter's own no-data timer cut the stream. */
  stalled: boolean
}

/** The error an aborted request ends with: named `AbortError`, carrying the abort reason. */
export function abortError(signal: AbortSignal): Error {
  if (signal.reason instanceof Error && signal.reason.name === 'AbortError') return signal.reason
  const error = new Error('the model request was aborted', { cause: signal.reason })
  error.name = 'AbortError'
  return error
}

/**
 * Maps whatever the SDK, fetch or the stream reader threw to the adapter contract: an
 * `AbortError` when the caller aborted, otherwise an `LlmError` that says what happened
 * and, for HTTP errors, carries the status and the server's own message.
 */
export function toLlmError(error: unknown, ctx: ErrorContext): Error {
  if (ctx.signal.aborted) return abortError(ctx.signal)
  if (ctx.stalled) return new OpenAIChatError('STALLED', `${ctx.label}: no data from ${ctx.baseURL} for ${ctx.timeoutMs} ms; gave up on the response (raise timeoutMs if the model is slow)`, undefined, { cause: error })
  if (error instanceof LlmError) return error
  // The SDK checks the signal it was given; reaching here means it saw an abort we did not.
  if (error instanceof APIUserAbortError) return Object.assign(new Error(error.message, { cause: error }), { name: 'AbortError' })
  if (error instanceof APIConnectionTimeoutError) {
    return new OpenAIChatError('TIMEOUT', `${ctx.label}: ${ctx.baseURL} did not answer within ${ctx.timeoutMs} ms`, undefined, { cause: error })
  }
  if (error instanceof APIConnectionError) {
    return new OpenAIChatError('UNREACHABLE', `${ctx.label}: cannot reach ${ctx.baseURL}: ${innermostMessage(error.cause ?? error)}`, undefined, { cause: error })
  }
  if (error instanceof APIError) {
    const message = serverMessage(error)
    if (error.status === undefined) return new OpenAIChatError('BAD_STREAM', `${ctx.label}: the response stream reported an error: ${message}`, undefined, { cause: error })
    const hint = error.status === 401 || error.status === 403 ? ` (check the API key in ${ctx.apiKeyEnv})` : ''
    return new OpenAIChatError('HTTP_STATUS', `${ctx.label}: HTTP ${error.status} from ${ctx.baseURL}: ${message}${hint}`, error.status, { cause: error })
  }
  if (error instanceof SyntaxError) {
    return new OpenAIChatError('BAD_STREAM', `${ctx.label}: malformed response stream from ${ctx.baseURL}: ${error.message}`, undefined, { cause: error })
  }
  return new OpenAIChatError('CONNECTION_LOST', `${ctx.label}: the response from ${ctx.baseURL} broke off: ${innermostMessage(error)}`, undefined, { cause: error })
}

/** The server's `error.message` when the body had the OpenAI shape, else the SDK's summary. */
function serverMessage(error: APIError): string {
  const body: unknown = error.error
  if (typeof body === 'object' && body !== null && 'message' in body && typeof body.message === 'string' && body.message) return body.message
  // The SDK prefixes its own summary with the status, which our message already carries.
  return error.message.replace(/^\d{3} /, '')
}

/** fetch wraps the useful part (`ECONNREFUSED`, `other side closed`) a few causes deep. */
function innermostMessage(error: unknown): string {
  const messages: string[] = []
  for (let at: unknown = error, depth = 0; at instanceof Error && depth < 5; at = at.cause, depth++) messages.push(at.message)
  return messages.filter(Boolean).join(': ') || String(error)
}
