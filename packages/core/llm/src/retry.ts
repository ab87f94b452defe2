import { LlmError } from './errors.js'

/**
 * How an adapter retries a failed request, the same for every vendor: bounded in count and
 * in total waiting time. Adapters own only what is theirs (where a server's own wait is
 * read from: their SDK's error carries the response headers).
 */
export interface RetryPolicy {
  /** Retries after the first attempt; 0 surfaces every failure at once. */
  maxRetries: number
  /** First backoff; each next one doubles (with jitter), capped at `retryMaxDelayMs`. */
  retryBaseDelayMs: number
  retryMaxDelayMs: number
  /** Most time all waits of one request may add up to; a longer `Retry-After` gives up. */
  retryBudgetMs: number
}

/**
 * Failures worth another attempt: rate limits, server errors (an overloaded server among
 * them), and connections that never answered or broke. Only while nothing of the response
 * was passed on: a retry after text was streamed would repeat it.
 */
export function isRetryable(error: unknown): boolean {
  if (!(error instanceof LlmError)) return false
  switch (error.code) {
    case 'RATE_LIMITED':
    case 'HTTP_SERVER':
    case 'UNREACHABLE':
    case 'TIMEOUT':
    case 'CONNECTION_LOST':
      return true
    default:
      return false
  }
}

/** Response headers, as fetch's `Headers` has them. */
export interface HeaderLookup {
  get(name: string): string | null
}

/**
 * The server's own wait, from its response headers: `retry-after-ms` (OpenAI), else
 * `retry-after` in seconds or as an HTTP date. Undefined when there is none or it does not parse.
 */
export function retryAfterOfHeaders(headers: HeaderLookup | undefined, now = Date.now()): number | undefined {
  if (!headers) return undefined
  const ms = Number(headers.get('retry-after-ms') ?? Number.NaN)
  if (Number.isFinite(ms) && ms >= 0) return ms
  const value = headers.get('retry-after')
  if (value === null || !value.trim()) return undefined
  const seconds = Number(value)
  if (Number.isFinite(seconds) && seconds >= 0) return seconds * 1000
  const date = Date.parse(value)
  return Number.isNaN(date) ? undefined : Math.max(0, date - now)
}

/** The wait before retry number `retry` (0-based): exponential with up to 25% jitter. */
export function backoffMs(policy: RetryPolicy, retry: number, random = Math.random): number {
  const exponential = Math.min(policy.retryMaxDelayMs, policy.retryBaseDelayMs * 2 ** retry)
  return Math.round(exponential * (0.75 + 0.25 * random()))
}

/** Tracks one request's retries: how many were made and how much waiting is left. */
export class RetryBudget {
  private retries = 0
  private waitedMs = 0

  /** `serverWait` reads the wait a failure's server asked for (its `Retry-After`), if any. */
  constructor(
    private readonly policy: RetryPolicy,
    private readonly serverWait: (error: unknown) => number | undefined = () => undefined,
  ) {}

  get count(): number {
    return this.retries
  }

  /**
   * The wait before the next attempt after `error`, or a reason to stop: the error is not
   * retryable, the retries are used up, or the wait would overrun the time budget.
   */
  next(error: unknown): { waitMs: number } | { stop: string } {
    if (!isRetryable(error)) return { stop: '' }
    if (this.retries >= this.policy.maxRetries) return { stop: this.retries ? `gave up after ${this.retries} ${this.retries === 1 ? 'retry' : 'retries'}` : '' }
    const told = this.serverWait(error)
    const waitMs = told ?? backoffMs(this.policy, this.retries)
    const left = this.policy.retryBudgetMs - this.waitedMs
    if (waitMs > left) {
      return { stop: `${told !== undefined ? `the server asked to wait ${told} ms` : `the next backoff (${waitMs} ms)`}, which is more than the ${left} ms left of retryBudgetMs; gave up after ${this.retries} ${this.retries === 1 ? 'retry' : 'retries'}` }
    }
    this.retries++
    this.waitedMs += waitMs
    return { waitMs }
  }
}

/**
 * The final error of a request that was retried: the last failure, of its own class, with
 * why retrying stopped appended (`(gave up after 3 retries)`).
 */
export function exhausted(error: unknown, why: string): unknown {
  if (!why || !(error instanceof LlmError)) return error
  const Class = error.constructor as typeof LlmError
  return new Class(error.code, `${error.message} (${why})`, { ...(error.status !== undefined && { status: error.status }), cause: error })
}

/** The error an aborted request ends with: named `AbortError`, carrying the abort reason. */
export function abortErrorOf(signal: AbortSignal): Error {
  if (signal.reason instanceof Error && signal.reason.name === 'AbortError') return signal.reason
  const error = new Error('the model request was aborted', { cause: signal.reason })
  error.name = 'AbortError'
  return error
}

/** Resolves after `ms`, or rejects with an `AbortError` as soon as `signal` aborts. */
export function waitUnlessAborted(ms: number, signal: AbortSignal): Promise<void> {
  if (signal.aborted) return Promise.reject(abortErrorOf(signal))
  return new Promise((resolve, reject) => {
    const onAbort = () => {
      clearTimeout(timer)
      reject(abortErrorOf(signal))
    }
    const timer = setTimeout(() => {
      signal.removeEventListener('abort', onAbort)
      resolve()
    }, ms)
    signal.addEventListener('abort', onAbort, { once: true })
  })
}
