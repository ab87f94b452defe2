import { DshError } from '@dsh/base'

/**
 * Why a model request failed, whatever the provider. Adapters map their wire's failures
 * to these, so a caller (a retry policy, a CLI message) branches on one vocabulary.
 */
export type LlmErrorCode =
  /** The API key variable is unset or empty; the message names it. */
  | 'NO_API_KEY'
  /** HTTP 401 or 403: the key is wrong or lacks access. */
  | 'AUTH'
  /** HTTP 429: too many requests or tokens; retry later. */
  | 'RATE_LIMITED'
  /** Any other HTTP 4xx: the request itself was refused. */
  | 'HTTP_CLIENT'
  /** HTTP 5xx (or any other non-2xx status): the provider failed. */
  | 'HTTP_SERVER'
  /** No connection (refused, DNS, TLS). */
  | 'UNREACHABLE'
  /** No response headers within the adapter's timeout. */
  | 'TIMEOUT'
  /** A started stream sent nothing for the adapter's timeout. */
  | 'STALLED'
  /** The connection broke mid-response. */
  | 'CONNECTION_LOST'
  /** The response was not what the protocol promises (not JSON, an error event inside the stream). */
  | 'BAD_RESPONSE'
  /** The stream ended without a usable finish (none, an unknown reason, a nameless tool call). */
  | 'INCOMPLETE_RESPONSE'
  /** A scripted model's script file is missing or unreadable. */
  | 'UNREADABLE_SCRIPT'
  /** A scripted model's script breaks the format (the message names the element). */
  | 'INVALID_SCRIPT'
  /** No scripted reply: a session's first request matched no rule. */
  | 'NO_RULE'
  /** No scripted reply: a session asked for more replies than its rule has. */
  | 'OUT_OF_REPLIES'
  /** A scripted `error` item: a provider failure the script simulates. */
  | 'SIMULATED'
  /** A recording to replay is missing, truncated, hand-edited into an invalid shape, or from another format version. */
  | 'INVALID_RECORDING'
  /** A replayed session has no recording (more live sessions than recorded ones, or a lineage that differs). */
  | 'NO_RECORDING'
  /** A replayed session asked the model something other than what was recorded, or more often. */
  | 'REPLAY_DIVERGED'

/**
 * A provider-side failure of one model request. Adapters may narrow `Code` to the codes
 * they raise (`class OpenAIChatError extends LlmError<'TIMEOUT' | …>`). `status` is the
 * HTTP status when the provider answered with one.
 */
export class LlmError<Code extends LlmErrorCode = LlmErrorCode> extends DshError<Code> {
  readonly status?: number
  constructor(code: Code, message: string, options?: { status?: number; cause?: unknown }) {
    super(code, message, options?.cause === undefined ? undefined : { cause: options.cause })
    if (options?.status !== undefined) this.status = options.status
  }
}

/** The code of an HTTP error status, by its class. */
export function llmErrorCodeOfStatus(status: number): 'AUTH' | 'RATE_LIMITED' | 'HTTP_CLIENT' | 'HTTP_SERVER' {
  if (status === 401 || status === 403) return 'AUTH'
  if (status === 429) return 'RATE_LIMITED'
  if (status >= 400 && status < 500) return 'HTTP_CLIENT'
  return 'HTTP_SERVER'
}

export type LlmRegistryErrorCode =
  /** An adapter with that name is already registered. */
  | 'DUPLICATE_ADAPTER'
  /** The model spec names an adapter that is not loaded. */
  | 'NO_ADAPTER'
  /** No model spec was given and none is configured, or the adapter has no default model. */
  | 'NO_MODEL'
  /** A session must be recorded or replayed, and no recording plugin is loaded. */
  | 'NO_RECORDING'
  /** The configured price table has a malformed entry, a negative price, or names an adapter that is not loaded. */
  | 'INVALID_PRICES'

/** A failure of `ctx.llm` itself (registration, resolving a model spec). */
export class LlmRegistryError extends DshError<LlmRegistryErrorCode> {}
