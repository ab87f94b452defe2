import { authHint, LlmError, llmErrorCodeOfStatus, retryAfterOfSdkError, sdkFailureToLlmError, type ErrorContext, type SdkAdapterErrorCode, type SdkErrorMapping } from '@dsh/llm'
import type { APIError } from '@anthropic-ai/sdk'
import { loadedSdk } from './sdk.js'

/**
 * The codes this adapter raises, a part of `LlmErrorCode` (each is documented there). An
 * HTTP error is coded by its status class (529 `overloaded_error` is `HTTP_SERVER`, so it is
 * retried); an `error` event inside the stream is coded by its type the same way.
 */
export type AnthropicErrorCode = SdkAdapterErrorCode

/** A failure of a Messages endpoint, with a stable `code` for callers that branch on it. */
export class AnthropicError extends LlmError<AnthropicErrorCode> {}

export type { ErrorContext }

/** What this adapter's failures are called; the rest of the mapping is `@dsh/llm`'s `sdkFailureToLlmError`, every SDK-backed adapter's. */
const mapping: SdkErrorMapping<APIError> = {
  Error: AnthropicError,
  sdk: loadedSdk,
  malformed: 'malformed event in the response stream',
  httpError(error, ctx) {
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
  },
}

/**
 * Maps whatever the SDK, fetch or the event reader threw to the adapter contract: an
 * `AbortError` when the caller aborted, otherwise an `AnthropicError` that says what
 * happened and, for HTTP errors, carries the status and the server's own message.
 */
export function toLlmError(error: unknown, ctx: ErrorContext): Error {
  return sdkFailureToLlmError(error, ctx, mapping)
}

/** The wait the server asked for (`retry-after-ms`, `retry-after`), read from the SDK's error this adapter's error wraps. */
export function retryAfterMs(error: unknown, now = Date.now()): number | undefined {
  return retryAfterOfSdkError(error, loadedSdk()?.APIError, now)
}
