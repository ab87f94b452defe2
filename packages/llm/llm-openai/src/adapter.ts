import { QuietTimer, type LlmAdapter, type LlmChunk, type LlmRequest } from '@dsh/llm'
import type OpenAI from 'openai'
import { NO_KEY, OpenAIChatConfig, resolveApiKeyEnv } from './config.js'
import { abortError, OpenAIChatError, toLlmError } from './errors.js'
import { ChunkReader } from './from-wire.js'
import { toChatRequest } from './to-wire.js'
import { exhausted, retryAfterMs, RetryBudget, waitUnlessAborted } from './retry.js'
import { loadSdk } from './sdk.js'

export interface OpenAIChatAdapterOptions extends Partial<OpenAIChatConfig> {
  /** The key itself (tests, embedding). Without it the key is read from `apiKeyEnv` in `env` (none with `apiKeyEnv: none`). */
  apiKey?: string
  /** Where `apiKeyEnv` is looked up; `process.env` unless given. */
  env?: Readonly<Record<string, string | undefined>>
}

/**
 * An `LlmAdapter` for OpenAI-compatible chat completions through the official SDK,
 * DeepSeek by default. The key is read once, at construction: a missing key does not stop
 * the adapter from loading, it makes each request fail with an `LlmError` naming the
 * variable to set.
 */
export class OpenAIChatAdapter implements LlmAdapter {
  readonly name: string
  readonly defaultModel: string
  readonly config: OpenAIChatConfig
  private readonly apiKey: string | undefined
  /** `apiKeyEnv: none`: no key is read and no `Authorization` header is sent. */
  private readonly keyless: boolean
  private readonly sdkLogLevel: 'off' | undefined
  /** Made on the first request, when the SDK is imported (see `sdk.ts`). */
  private client: Promise<OpenAI> | undefined

  constructor(options: OpenAIChatAdapterOptions = {}) {
    const { apiKey, env = process.env, ...config } = options
    const validated = OpenAIChatConfig(config)
    // An explicit key is its caller's decision for this endpoint; otherwise the variable must be the endpoint's own.
    const apiKeyEnv = apiKey !== undefined ? (validated.apiKeyEnv ?? '(the apiKey option)') : resolveApiKeyEnv(validated)
    if (apiKeyEnv === undefined) {
      // At load, so `dsh config check` and every start report it before any request.
      throw new OpenAIChatError(
        'NO_API_KEY',
        `${validated.name}: baseURL ${validated.baseURL} is not DeepSeek's, so the DeepSeek key is not sent there: set apiKeyEnv to the variable holding this endpoint's key, or apiKeyEnv: ${NO_KEY} for a server that takes no key`,
      )
    }
    this.config = { ...validated, apiKeyEnv }
    this.name = this.config.name
    this.defaultModel = this.config.model
    this.keyless = apiKey === undefined && this.config.apiKeyEnv === NO_KEY
    this.apiKey = apiKey ?? (this.keyless ? undefined : env[this.config.apiKeyEnv])
    this.sdkLogLevel = env.OPENAI_LOG ? undefined : 'off'
  }

  private connect(apiKey: string | undefined): Promise<OpenAI> {
    this.client ??= loadSdk().then(
      ({ default: OpenAIClient }) =>
        new OpenAIClient({
          // Without one the SDK would read OPENAI_API_KEY; a keyless endpoint gets a
          // placeholder that the null header below keeps off the wire.
          apiKey: apiKey ?? 'unused',
          ...(apiKey === undefined && { defaultHeaders: { Authorization: null } }),
          baseURL: this.config.baseURL,
          // Retries are ours (see `stream`): the SDK's wait cannot be cancelled, and it does
          // not retry a stream that broke before its first chunk.
          maxRetries: 0,
          timeout: this.config.timeoutMs,
          // Left undefined, the SDK would read OPENAI_ORG_ID / OPENAI_PROJECT_ID and send
          // them to whatever endpoint this is.
          organization: null,
          project: null,
          // Our errors carry what the SDK would print to the console (which a TUI or an ACP
          // session must not get); OPENAI_LOG still turns its logging on for debugging.
          logLevel: this.sdkLogLevel,
        }),
    )
    return this.client
  }

  /**
   * Streams one response. A failure worth retrying (429, 5xx, no answer, a connection that
   * broke) before any chunk was passed on is retried after the server's `Retry-After` or
   * an exponential backoff, within `maxRetries` and `retryBudgetMs`; aborting the request
   * ends a wait at once. Once a chunk was passed on, a failure ends the stream: retrying
   * then would repeat what the caller already has.
   */
  async *stream(request: LlmRequest): AsyncGenerator<LlmChunk> {
    const { name, baseURL, apiKeyEnv } = this.config
    if (request.signal.aborted) throw abortError(request.signal)
    if (!this.keyless && !this.apiKey) {
      throw new OpenAIChatError('NO_API_KEY', `${name}: no API key: set the ${apiKeyEnv} environment variable (the "${name}" adapter talks to ${baseURL})`)
    }
    const client = await this.connect(this.apiKey)
    const budget = new RetryBudget(this.config, retryAfterMs)
    for (;;) {
      let passedOn = false
      try {
        for await (const chunk of this.attempt(client, request)) {
          passedOn = true
          yield chunk
        }
        return
      } catch (error) {
        // A caller that aborted gets its abort, whatever the failure looked like.
        if (request.signal.aborted) throw abortError(request.signal)
        if (passedOn) throw error
        const next = budget.next(error)
        if ('stop' in next) throw exhausted(error, next.stop)
        await waitUnlessAborted(next.waitMs, request.signal)
      }
    }
  }

  private async *attempt(client: OpenAI, request: LlmRequest): AsyncGenerator<LlmChunk> {
    const { name, baseURL, apiKeyEnv, timeoutMs, replayReasoning } = this.config

    const quiet = new QuietTimer(timeoutMs)
    const signal = AbortSignal.any([request.signal, quiet.signal])
    try {
      const stream = await client.chat.completions.create(toChatRequest(request, { replayReasoning }), { signal })
      const reader = new ChunkReader(name)
      quiet.restart()
      for await (const chunk of stream) {
        quiet.restart()
        yield* reader.read(chunk)
      }
      // The SDK ends its iterator quietly when its signal aborts, so a short stream may be
      // an abort or a stall rather than the end of the response.
      if (request.signal.aborted || quiet.expired) throw abortError(signal)
      yield* reader.finish()
    } catch (error) {
      throw toLlmError(error, { label: name, baseURL, apiKeyEnv, timeoutMs, signal: request.signal, stalled: quiet.expired })
    } finally {
      quiet.stop()
    }
  }
}
