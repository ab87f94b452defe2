import { abortErrorOf, exhausted, QuietTimer, RetryBudget, waitUnlessAborted, type LlmAdapter, type LlmChunk, type LlmRequest } from '@dsh/llm'
import type Anthropic from '@anthropic-ai/sdk'
import { AnthropicConfig, NO_KEY, resolveApiKeyEnv } from './config.js'
import { AnthropicError, retryAfterMs, toLlmError } from './errors.js'
import { EventReader } from './from-wire.js'
import { toMessagesRequest } from './to-wire.js'
import { loadSdk } from './sdk.js'

export interface AnthropicAdapterOptions extends Partial<AnthropicConfig> {
  /** The key itself (tests, embedding). Without it the key is read from `apiKeyEnv` in `env` (none with `apiKeyEnv: none`). */
  apiKey?: string
  /** Where `apiKeyEnv` is looked up; `process.env` unless given. */
  env?: Readonly<Record<string, string | undefined>>
}

/**
 * An `LlmAdapter` for Anthropic's Messages API through the official SDK. The key is read
 * once, at construction: a missing key does not stop the adapter from loading, it makes
 * each request fail with an `LlmError` naming the variable to set.
 */
export class AnthropicAdapter implements LlmAdapter {
  readonly name: string
  readonly defaultModel: string
  readonly config: AnthropicConfig
  private readonly apiKey: string | undefined
  /** `apiKeyEnv: none`: no key is read and no `Authorization` header is sent. */
  private readonly keyless: boolean
  private readonly sdkLogLevel: 'off' | undefined
  /** Made on the first request, when the SDK is imported (see `sdk.ts`). */
  private client: Promise<Anthropic> | undefined

  constructor(options: AnthropicAdapterOptions = {}) {
    const { apiKey, env = process.env, ...config } = options
    const validated = AnthropicConfig(config)
    // An explicit key is its caller's decision for this endpoint; otherwise the variable must be the endpoint's own.
    const apiKeyEnv = apiKey !== undefined ? (validated.apiKeyEnv ?? '(the apiKey option)') : resolveApiKeyEnv(validated)
    if (apiKeyEnv === undefined) {
      // At load, so `dsh config check` and every start report it before any request.
      throw new AnthropicError(
        'NO_API_KEY',
        `${validated.name}: baseURL ${validated.baseURL} is not Anthropic's (https://api.anthropic.com), so ANTHROPIC_API_KEY is not sent there: set apiKeyEnv to the variable holding this endpoint's key, or apiKeyEnv: ${NO_KEY} for a server that takes no key`,
      )
    }
    this.config = { ...validated, apiKeyEnv }
    this.name = this.config.name
    this.defaultModel = this.config.model
    this.keyless = apiKey === undefined && this.config.apiKeyEnv === NO_KEY
    this.apiKey = apiKey ?? (this.keyless ? undefined : env[this.config.apiKeyEnv])
    this.sdkLogLevel = env.ANTHROPIC_LOG ? undefined : 'off'
  }

  private connect(apiKey: string | undefined): Promise<Anthropic> {
    this.client ??= loadSdk().then(
      ({ default: AnthropicClient }) =>
        new AnthropicClient({
          // Given in code, a credential is the client's only one: the SDK then reads no
          // ANTHROPIC_API_KEY / ANTHROPIC_AUTH_TOKEN and no profile or credentials file. A
          // keyless endpoint gets a placeholder that the null header below keeps off the wire.
          apiKey: apiKey ?? 'unused',
          baseURL: this.config.baseURL,
          defaultHeaders: this.unsentHeaders(apiKey),
          // Retries are ours (see `stream`): the SDK's wait cannot be cancelled.
          maxRetries: 0,
          timeout: this.config.timeoutMs,
          // dsh's own tracing records model calls; the SDK's spans and trace headers would
          // send trace context to whatever endpoint this is.
          openTelemetry: false,
          // Our errors carry what the SDK would print to the console (which a TUI or an ACP
          // session must not get); ANTHROPIC_LOG still turns its logging on for debugging.
          logLevel: this.sdkLogLevel,
        }),
    )
    return this.client
  }

  /**
   * Headers the SDK would add on its own and that must not leave: those of
   * `ANTHROPIC_CUSTOM_HEADERS` (a credential for one proxy would reach any endpoint), and
   * `Authorization` for a keyless endpoint. A null default header is one the SDK leaves out.
   */
  private unsentHeaders(apiKey: string | undefined): Record<string, string | null> {
    const headers: Record<string, string | null> = {}
    // The SDK reads the variable from the process's environment when the client is made, as this does.
    for (const line of (process.env.ANTHROPIC_CUSTOM_HEADERS ?? '').split('\n')) {
      const name = line.slice(0, line.indexOf(':')).trim()
      if (line.includes(':') && name) headers[name] = null
    }
    // Set last, so a custom `Authorization` cannot stand in for the key: ours, or none.
    for (const name of Object.keys(headers)) if (name.toLowerCase() === 'authorization' || name.toLowerCase() === 'x-api-key') delete headers[name]
    headers['X-Api-Key'] = null
    headers.Authorization = apiKey === undefined ? null : `Bearer ${apiKey}`
    return headers
  }

  /**
   * Streams one response. A failure worth retrying (429, 5xx with 529 overloaded, no
   * answer, a connection that broke) before any chunk was passed on is retried after the
   * server's `retry-after` or an exponential backoff, within `maxRetries` and
   * `retryBudgetMs`; aborting the request ends a wait at once. Once a chunk was passed on,
   * a failure ends the stream: retrying then would repeat what the caller already has.
   */
  async *stream(request: LlmRequest): AsyncGenerator<LlmChunk> {
    const { name, baseURL, apiKeyEnv } = this.config
    if (request.signal.aborted) throw abortErrorOf(request.signal)
    if (!this.keyless && !this.apiKey) {
      throw new AnthropicError('NO_API_KEY', `${name}: no API key: set the ${apiKeyEnv} environment variable (the "${name}" adapter talks to ${baseURL})`)
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
        if (request.signal.aborted) throw abortErrorOf(request.signal)
        if (passedOn) throw error
        const next = budget.next(error)
        if ('stop' in next) throw exhausted(error, next.stop)
        await waitUnlessAborted(next.waitMs, request.signal)
      }
    }
  }

  private async *attempt(client: Anthropic, request: LlmRequest): AsyncGenerator<LlmChunk> {
    const { name, baseURL, apiKeyEnv, timeoutMs, maxTokens, promptCaching } = this.config
    const quiet = new QuietTimer(timeoutMs)
    const signal = AbortSignal.any([request.signal, quiet.signal])
    try {
      const stream = await client.messages.create(toMessagesRequest(request, { maxTokens, promptCaching }), { signal })
      const reader = new EventReader(name)
      quiet.restart()
      for await (const event of stream) {
        quiet.restart()
        yield* reader.read(event)
      }
      // The SDK ends its iterator quietly when its signal aborts, so a short stream may be
      // an abort or a stall rather than the end of the response.
      if (request.signal.aborted || quiet.expired) throw abortErrorOf(signal)
      yield* reader.finish()
    } catch (error) {
      throw toLlmError(error, { label: name, baseURL, apiKeyEnv, timeoutMs, signal: request.signal, stalled: quiet.expired })
    } finally {
      quiet.stop()
    }
  }
}
