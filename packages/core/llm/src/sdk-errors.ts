import { errorMessage } from '@dsh/base'
import { LlmError, type LlmErrorCode } from './errors.js'
import { abortErrorOf, retryAfterOfHeaders, type HeaderLookup } from './retry.js'

/**
 * How an adapter built on a vendor's HTTP SDK (openai, @anthropic-ai/sdk: both throw the same
 * family of error classes) maps what went wrong to `LlmError`s, so every such adapter reports
 * an abort, a timeout, an unreachable server, a stall and a broken stream in the same words.
 * Only what the vendor's HTTP error says (its body's shape) is the adapter's own.
 */

/** `apiKeyEnv: none`: the server takes no key, and no key header is sent. */
export const NO_KEY = 'none'

/** The codes an SDK-backed adapter raises, a part of `LlmErrorCode` (each is documented there). */
export type SdkAdapterErrorCode = Extract<
  LlmErrorCode,
  'NO_API_KEY' | 'AUTH' | 'RATE_LIMITED' | 'HTTP_CLIENT' | 'HTTP_SERVER' | 'UNREACHABLE' | 'TIMEOUT' | 'STALLED' | 'CONNECTION_LOST' | 'BAD_RESPONSE' | 'INCOMPLETE_RESPONSE'
>

/** An adapter's own `LlmError` class: every failure it reports is one (callers test `instanceof`). */
export type SdkAdapterErrorClass = new (code: SdkAdapterErrorCode, message: string, options?: { status?: number; cause?: unknown }) => LlmError

// Any class, abstract or not: only `instanceof` is asked of them.
type ErrorClassOf<T> = abstract new (...args: never[]) => T

/** The SDK error classes the mapping tells apart, as both SDKs export them. */
export interface SdkErrorClasses<ApiError extends Error> {
  APIUserAbortError: ErrorClassOf<Error>
  APIConnectionTimeoutError: ErrorClassOf<Error>
  APIConnectionError: ErrorClassOf<Error>
  APIError: ErrorClassOf<ApiError>
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

/** What is an adapter's own in the mapping. */
export interface SdkErrorMapping<ApiError extends Error> {
  Error: SdkAdapterErrorClass
  /** The SDK's classes if a request already imported it, else `undefined`: an error can only be one of them once it is loaded. */
  sdk: () => SdkErrorClasses<ApiError> | undefined
  /** What a response that does not parse is called (`malformed response stream`). */
  malformed: string
  /** The SDK's HTTP error (a status, or an error inside a started stream without one), mapped. */
  httpError: (error: ApiError, ctx: ErrorContext) => LlmError
}

/**
 * Maps whatever the SDK, fetch or the stream reader threw to the adapter contract: an
 * `AbortError` when the caller aborted, otherwise an `LlmError` of the adapter's class that
 * says what happened and, for HTTP errors, carries the status and the server's own message.
 */
export function sdkFailureToLlmError<ApiError extends Error>(error: unknown, ctx: ErrorContext, mapping: SdkErrorMapping<ApiError>): Error {
  const { Error: AdapterError } = mapping
  if (ctx.signal.aborted) return abortErrorOf(ctx.signal)
  if (ctx.stalled) return new AdapterError('STALLED', `${ctx.label}: no data from ${ctx.baseURL} for ${ctx.timeoutMs} ms; gave up on the response (raise timeoutMs if the model is slow)`, { cause: error })
  if (error instanceof LlmError) return error
  const fromSdk = sdkFailure(error, ctx, mapping)
  if (fromSdk) return fromSdk
  if (error instanceof SyntaxError) {
    return new AdapterError('BAD_RESPONSE', `${ctx.label}: ${mapping.malformed} from ${ctx.baseURL}: ${error.message}`, { cause: error })
  }
  return new AdapterError('CONNECTION_LOST', `${ctx.label}: the response from ${ctx.baseURL} broke off: ${innermostMessage(error)}`, { cause: error })
}

/** The SDK's own errors (abort, timeout, connection, HTTP), mapped; `undefined` for anything else. */
function sdkFailure<ApiError extends Error>(error: unknown, ctx: ErrorContext, mapping: SdkErrorMapping<ApiError>): Error | undefined {
  const sdk = mapping.sdk()
  if (sdk === undefined) return undefined
  const { Error: AdapterError } = mapping
  // The SDK checks the signal it was given; reaching here means it saw an abort we did not.
  if (error instanceof sdk.APIUserAbortError) return Object.assign(new Error(error.message, { cause: error }), { name: 'AbortError' })
  if (error instanceof sdk.APIConnectionTimeoutError) return new AdapterError('TIMEOUT', `${ctx.label}: ${ctx.baseURL} did not answer within ${ctx.timeoutMs} ms`, { cause: error })
  if (error instanceof sdk.APIConnectionError) return new AdapterError('UNREACHABLE', `${ctx.label}: cannot reach ${ctx.baseURL}: ${innermostMessage(error.cause ?? error)}`, { cause: error })
  if (error instanceof sdk.APIError) return mapping.httpError(error, ctx)
  return undefined
}

/** fetch wraps the useful part (`ECONNREFUSED`, `other side closed`, `terminated`) a few causes deep. */
export function innermostMessage(error: unknown): string {
  const messages: string[] = []
  for (let at: unknown = error, depth = 0; at instanceof Error && depth < 5; at = at.cause, depth++) messages.push(at.message)
  return messages.filter(Boolean).join(': ') || errorMessage(error)
}

/** What an HTTP 401 or 403 adds: which key to check, or that none was sent. */
export function authHint(apiKeyEnv: string): string {
  return apiKeyEnv === NO_KEY ? ' (no key was sent, as apiKeyEnv: none says: set apiKeyEnv to the variable holding its key)' : ` (check the API key in ${apiKeyEnv})`
}

/**
 * The wait the server asked for (`retry-after-ms`, `retry-after`), read from the SDK's HTTP
 * error that an adapter's error wraps as its cause; `APIError` is `undefined` while the SDK
 * is not loaded (then no error carries response headers).
 */
export function retryAfterOfSdkError(error: unknown, APIError: ErrorClassOf<{ headers?: HeaderLookup | undefined }> | undefined, now = Date.now()): number | undefined {
  const cause = error instanceof Error ? error.cause : undefined
  return retryAfterOfHeaders(APIError !== undefined && cause instanceof APIError ? cause.headers : undefined, now)
}
