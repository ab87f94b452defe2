import { errorMessage } from '@dsh/base'
import { abortErrorOf, LlmError, llmErrorCodeOfStatus, retryAfterOfHeaders, type LlmErrorCode } from '@dsh/llm'
import { NO_KEY } from './config.js'
import { loadedSdk } from './sdk.js'

/**
 * The codes this adapter raises, a part of `LlmErrorCode` (each is documented there). An
 * HTTP error is coded by its status class (529 `overloaded_error` is `HTTP_SERVER`, so it is
 * retried); an `error` event inside the stream is coded by its type the same way.
 */
export type AnthropicErrorCode = Extract<
  LlmErrorCode,
  'NO_API_KEY' | 'AUTH' | 'RATE_LIMITED' | 'HTTP_CLIENT' | 'HTTP_SERVER' | 'UNREACHABLE' | 'TIMEOUT' | 'STALLED' | 'CONNECTION_LOST' | 'BAD_RESPONSE' | 'INCOMPLETE_RESPONSE'
>

/** A failure of a Messages endpoint, with a stable `code` for callers that branch on it. */
export class AnthropicError extends LlmError<AnthropicErrorCode> {}

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

/**
 * Maps whatever the SDK, fetch or the event reader threw to the adapter contract: an
 * `AbortError` when the caller aborted, otherwise an `AnthropicError` that says what
 * happened and, for HTTP errors, carries the status and the server's own message.
 */
export function toLlmError(error: unknown, ctx: ErrorContext): Error {
  if (ctx.signal.aborted) return abortErrorOf(ctx.signal)
  if (ctx.stalled) return new AnthropicError('STALLED', `${ctx.label}: no data from ${ctx.baseURL} for ${ctx.timeoutMs} ms; gave up on the response (raise timeoutMs if the model is slow)`, { cause: error })
  if (error instanceof LlmError) return error
  const fromSdk = sdkFailure(error, ctx)
  if (fromSdk) return fromSdk
  if (error instanceof SyntaxError) {
    return new AnthropicError('BAD_RESPONSE', `${ctx.label}: malformed event in the response stream from ${ctx.baseURL}: ${error.message}`, { cause: error })
  }
  return new AnthropicError('CONNECTION_LOST', `${ctx.label}: the response from ${ctx.baseURL} broke off: ${innermostMessage(error)}`, { cause: error })
}

/** The wait the server asked for (`retry-after-ms`, `retry-after`), read from the SDK's error this adapter's error wraps. */
export function retryAfterMs(error: unknown, now = Date.now()): number | undefined {
  const cause = error instanceof Error ? error.cause : undefined
  const APIError = loadedSdk()?.APIError
  return retryAfterOfHeaders(APIError !== undefined && cause instanceof APIError ? cause.headers : undefined, now)
}

function sdkFailure(error: unknown, ctx: ErrorContext): Error | undefined {
  // An error can only be one of the SDK's once a request has imported it.
  const sdk = loadedSdk()
  if (sdk === undefined) return undefined
  const { APIConnectionError, APIConnectionTimeoutError, APIError, APIUserAbortError } = sdk
  if (error instanceof APIUserAbortError) return Object.assign(new Error(error.message, { cause: error }), { name: 'AbortError' })
  if (error instanceof APIConnectionTimeoutError) return new AnthropicError('TIMEOUT', `${ctx.label}: ${ctx.baseURL} did not answer within ${ctx.timeoutMs} ms`, { cause: error })
  if (error instanceof APIConnectionError) return new AnthropicError('UNREACHABLE', `${ctx.label}: cannot reach ${ctx.baseURL}: ${innermostMessage(error.cause ?? error)}`, { cause: error })
  if (!(error instanceof APIError)) return undefined
  const type = error.type ?? undefined
  const message = error.apiMessage || error.message.replace(/^\d{3} /, '')
  const typed = type ? ` (${type})` : ''
  if (error.status === undefined) {
    // An `error` event inside a stream that had started: the API's way to say it is overloaded mid-response.
    const code = type === 'overloaded_error' || type === 'api_error' ? 'HTTP_SERVER' : type === 'rate_limit_error' ? 'RATE_LIMITED' : 'BAD_RESPONSE'
    return new AnthropicError(code, `${ctx.label}: the response stream from ${ctx.baseURL} reported an error${typed}: ${message}`, { cause: error })
  }
  const hint = error.status === 401 || error.status === 403 ? authHint(ctx.apiKeyEnv) : ''
  return new AnthropicError(llmErrorCodeOfStatus(error.status), `${ctx.label}: HTTP ${error.status}${typed} from ${ctx.baseURL}: ${message}${hint}`, { status: error.status, cause: error })
}

/** fetch wraps the useful part (`ECONNREFUSED`, `terminated`) a few causes deep. */
function innermostMessage(error: unknown): string {
  const messages: string[] = []
  for (let at: unknown = error, depth = 0; at instanceof Error && depth < 5; at = at.cause, depth++) messages.push(at.message)
  return messages.filter(Boolean).join(': ') || errorMessage(error)
}

function authHint(apiKeyEnv: string): string {
  return apiKeyEnv === NO_KEY ? ' (no key was sent, as apiKeyEnv: none says: set apiKeyEnv to the variable holding its key)' : ` (check the API key in ${apiKeyEnv})`
}
