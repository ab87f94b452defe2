import { retryAfterOfSdkError } from '@dsh/llm'
import { loadedSdk } from './sdk.js'

/** The retry policy every adapter shares (`@dsh/llm`'s `retry.ts`); only reading the server's wait is this adapter's. */
export { backoffMs, exhausted, isRetryable, RetryBudget, waitUnlessAborted, type RetryPolicy } from '@dsh/llm'

/**
 * The server's own wait: `retry-after-ms` (OpenAI), else `retry-after` in seconds or as an
 * HTTP date, read from the SDK's error. Undefined when there is none or it does not parse.
 */
export function retryAfterMs(error: unknown, now = Date.now()): number | undefined {
  // Only the SDK's errors carry response headers, and there are none before it is loaded.
  return retryAfterOfSdkError(error, loadedSdk()?.APIError, now)
}
