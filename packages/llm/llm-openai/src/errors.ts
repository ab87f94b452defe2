import { LlmError, llmErrorCodeOfStatus, authHint, sdkFailureToLlmError, type ErrorContext, type SdkAdapterErrorCode, type SdkErrorMapping } from '@dsh/llm'
import type { APIError } from 'openai'
import { loadedSdk } from './sdk.js'

/**
 * The codes this adapter raises, a part of `LlmErrorCode` (each is documented there). An
 * HTTP error is coded by its status class (`AUTH`, `RATE_LIMITED`, `HTTP_CLIENT`,
 * `HTTP_SERVER`) and carries the status; `timeoutMs` is the timeout `TIMEOUT` and
 * `STALLED` speak of; `BAD_RESPONSE` is a stream event that is not JSON or an error event
 * inside the stream.
 */
export type OpenAIChatErrorCode = SdkAdapterErrorCode

/** A failure of an OpenAI-compatible endpoint, with a stable `code` for callers that branch on it. */
export class OpenAIChatError extends LlmError<OpenAIChatErrorCode> {}

export type { ErrorContext }

/** The error an aborted request ends with: named `AbortError`, carrying the abort reason. */
export { abortErrorOf as abortError } from '@dsh/llm'

/** What this adapter's failures are called; the rest of the mapping is `@dsh/llm`'s `sdkFailureToLlmError`, every SDK-backed adapter's. */
const mapping: SdkErrorMapping<APIError> = {
  Error: OpenAIChatError,
  sdk: loadedSdk,
  malformed: 'malformed response stream',
  httpError(error, ctx) {
    const message = serverMessage(error)
    if (error.status === undefined) return new OpenAIChatError('BAD_RESPONSE', `${ctx.label}: the response stream reported an error: ${message}`, { cause: error })
    const hint = error.status === 401 || error.status === 403 ? authHint(ctx.apiKeyEnv) : ''
    return new OpenAIChatError(llmErrorCodeOfStatus(error.status), `${ctx.label}: HTTP ${error.status} from ${ctx.baseURL}: ${message}${hint}`, { status: error.status, cause: error })
  },
}

/**
 * Maps whatever the SDK, fetch or the stream reader threw to the adapter contract: an
 * `AbortError` when the caller aborted, otherwise an `LlmError` that says what happened
 * and, for HTTP errors, carries the status and the server's own message.
 */
export function toLlmError(error: unknown, ctx: ErrorContext): Error {
  return sdkFailureToLlmError(error, ctx, mapping)
}

/** The server's `error.message` when the body had the OpenAI shape, else the SDK's summary. */
function serverMessage(error: APIError): string {
  const body: unknown = error.error
  if (typeof body === 'object' && body !== null && 'message' in body && typeof body.message === 'string' && body.message) return body.message
  // The SDK prefixes its own summary with the status, which our message already carries.
  return error.message.replace(/^\d{3} /, '')
}
