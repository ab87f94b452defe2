import { errorMessage } from '@dsh/base'
import { abortErrorOf as abortError, LlmError, llmErrorCodeOfStatus, type LlmErrorCode } from '@dsh/llm'
import type { APIError } from 'openai'
import { NO_KEY } from './config.js'
import { loadedSdk } from './sdk.js'

/**
 * The codes this adapter raises, a part of `LlmErrorCode` (each is documented there). An
 * HTTP error is coded by its status class (`AUTH`, `RATE_LIMITED`, `HTTP_CLIENT`,
 * `HTTP_SERVER`) and carries the status; `timeoutMs` is the timeout `TIMEOUT` and
 * `STALLED` speak of; `BAD_RESPONSE` is a stream event that is not JSON or an error event
 * inside the stream.
 */
export type OpenAIChatErrorCode = Extract<
  LlmErrorCode,
  'NO_API_KEY' | 'AUTH' | 'RATE_LIMITED' | 'HTTP_CLIENT' | 'HTTP_SERVER' | 'UNREACHABLE' | 'TIMEOUT' | 'STALLED' | 'CONNECTION_LOST' | 'BAD_RESPONSE' | 'INCOMPLETE_RESPONSE'
>

/** A failure of an OpenAI-compatible endpoint, with a stable `code` for callers that branch on it. */
export class OpenAIChatError extends LlmError<OpenAIChatErrorCode> {}

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
export { abortErrorOf as abortError } from '@dsh/llm'

/**
 * Maps whatever the SDK, fetch or the stream reader threw to the adapter contract: an
 * `AbortError` when the caller aborted, otherwise an `LlmError` that says what happened
 * and, for HTTP errors, carries the status and the server's own message.
 */
export function toLlmError(error: unknown, ctx: ErrorContext): Error {
  if (ctx.signal.aborted) return abortError(ctx.signal)
  if (ctx.stalled) return new OpenAIChatError('STALLED', `${ctx.label}: no data from ${ctx.baseURL} for ${ctx.timeoutMs} ms; gave up on the response (raise timeoutMs if the model is slow)`, { cause: error })
  if (error instanceof LlmError) return error
  const fromSdk = sdkFailure(error, ctx)
  if (fromSdk) return fromSdk
  if (error instanceof SyntaxError) {
    return new OpenAIChatError('BAD_RESPONSE', `${ctx.label}: malformed response stream from ${ctx.baseURL}: ${error.message}`, { cause: error })
  }
  return new OpenAIChatError('CONNECTION_LOST', `${ctx.label}: the response from ${ctx.baseURL} broke off: ${innermostMessage(error)}`, { cause: error })
}

/** The SDK's own errors (abort, timeout, connection, HTTP status), mapped; `undefined` for anything else. */
function sdkFailure(error: unknown, ctx: ErrorContext): Error | undefined {
  // An error can only be one of the SDK's once a request has imported it.
  const sdk = loadedSdk()
  if (sdk === undefined) return undefined
  const { APIConnectionError, APIConnectionTimeoutError, APIError, APIUserAbortError } = sdk
  // The SDK checks the signal it was given; reaching here means it saw an abort we did not.
  if (error instanceof APIUserAbortError) return Object.assign(new Error(error.message, { cause: error }), { name: 'AbortError' })
  if (error instanceof APIConnectionTimeoutError) {
    return new OpenAIChatError('TIMEOUT', `${ctx.label}: ${ctx.baseURL} did not answer within ${ctx.timeoutMs} ms`, { cause: error })
  }
  if (error instanceof APIConnectionError) {
    return new OpenAIChatError('UNREACHABLE', `${ctx.label}: cannot reach ${ctx.baseURL}: ${innermostMessage(error.cause ?? error)}`, { cause: error })
  }
  if (error instanceof APIError) {
    const message = serverMessage(error)
    if (error.status === undefined) return new OpenAIChatError('BAD_RESPONSE', `${ctx.label}: the response stream reported an error: ${message}`, { cause: error })
    const hint = error.status === 401 || error.status === 403 ? authHint(ctx.apiKeyEnv) : ''
    return new OpenAIChatError(llmErrorCodeOfStatus(error.status), `${ctx.label}: HTTP ${error.status} from ${ctx.baseURL}: ${message}${hint}`, { status: error.status, cause: error })
  }
  return undefined
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
  return messages.filter(Boolean).join(': ') || errorMessage(error)
}

function authHint(apiKeyEnv: string): string {
  return apiKeyEnv === NO_KEY ? ' (no key was sent, as apiKeyEnv: none says: set apiKeyEnv to the variable holding its key)' : ` (check the API key in ${apiKeyEnv})`
}
