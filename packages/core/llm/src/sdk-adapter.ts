import type { LlmAdapter, LlmRequest } from './adapter.js'
import type { LlmChunk } from './stream.js'
import { abortErrorOf, exhausted, RetryBudget, waitUnlessAborted, type RetryPolicy } from './retry.js'
import { NO_KEY, type SdkAdapterErrorClass } from './sdk-errors.js'

/** What every SDK-backed endpoint's config has (each adapter adds its own fields). */
export interface SdkEndpointConfig extends RetryPolicy {
  /** Adapter registry name: the `name:` prefix of model specs. */
  name: string
  baseURL: string
  model: string
  /** The variable holding the key, or `none` (`NO_KEY`). */
  apiKeyEnv: string
  /** Longest wait for the response to start, and for each next chunk once it streams. */
  timeoutMs: number
}

/** How an adapter is given its key. */
export interface SdkEndpointOptions {
  /** The key itself (tests, embedding). Without it the key is read from `apiKeyEnv` in `env` (none with `apiKeyEnv: none`). */
  apiKey?: string
  /** Where `apiKeyEnv` is looked up; `process.env` unless given. */
  env?: Readonly<Record<string, string | undefined>>
}

/** What is an adapter's own in setting up its endpoint. */
export interface SdkEndpointSetup<Config extends SdkEndpointConfig> extends SdkEndpointOptions {
  /** The validated config: every default filled in but the key variable, which depends on the URL. */
  config: Omit<Config, 'apiKeyEnv'> & { apiKeyEnv?: string }
  /** The key variable for this config, or `undefined` when it must name one (`keyEnvFor`). */
  keyEnvOf: (config: { baseURL: string; apiKeyEnv?: string | undefined }) => string | undefined
  /** Why the vendor's key is not a default for this base URL (`is not DeepSeek's, so the DeepSeek key is not sent there`). */
  notTheVendors: string
  /** The variable that turns the SDK's own console logging on (`OPENAI_LOG`); off otherwise. */
  sdkLogEnv: string
  Error: SdkAdapterErrorClass
}

/**
 * An `LlmAdapter` on a vendor's HTTP SDK: what every such adapter does the same way. The
 * key is read once, at construction: a base URL that is not the vendor's and names no key
 * variable is refused there (so `dsh config check` and every start report it before any
 * request); a missing key does not stop the adapter from loading, it makes each request
 * fail naming the variable to set. The client is made on the first request, when the SDK
 * is imported (a run on another model must not pay for parsing it). Retries are the
 * adapter's, not the SDK's (its wait cannot be cancelled). An adapter supplies its client,
 * one attempt at a response, and where its server's wait is read from.
 */
export abstract class SdkAdapter<Config extends SdkEndpointConfig, Client> implements LlmAdapter {
  readonly name: string
  readonly defaultModel: string
  readonly config: Config
  protected readonly apiKey: string | undefined
  /** `apiKeyEnv: none`: no key is read and no key header is sent. */
  protected readonly keyless: boolean
  /** What the client's `logLevel` is: `off` unless the SDK's log variable is set. */
  protected readonly sdkLogLevel: 'off' | undefined
  private readonly AdapterError: SdkAdapterErrorClass
  private client: Promise<Client> | undefined

  protected constructor(setup: SdkEndpointSetup<Config>) {
    const { apiKey, env = process.env, config: validated } = setup
    // An explicit key is its caller's decision for this endpoint; otherwise the variable must be the endpoint's own.
    const apiKeyEnv = apiKey !== undefined ? (validated.apiKeyEnv ?? '(the apiKey option)') : setup.keyEnvOf(validated)
    if (apiKeyEnv === undefined) {
      throw new setup.Error(
        'NO_API_KEY',
        `${validated.name}: baseURL ${validated.baseURL} ${setup.notTheVendors}: set apiKeyEnv to the variable holding this endpoint's key, or apiKeyEnv: ${NO_KEY} for a server that takes no key`,
      )
    }
    this.config = { ...validated, apiKeyEnv } as Config
    this.name = this.config.name
    this.defaultModel = this.config.model
    this.keyless = apiKey === undefined && this.config.apiKeyEnv === NO_KEY
    this.apiKey = apiKey ?? (this.keyless ? undefined : env[this.config.apiKeyEnv])
    this.sdkLogLevel = env[setup.sdkLogEnv] ? undefined : 'off'
    this.AdapterError = setup.Error
  }

  /** The SDK's client for this endpoint with `apiKey` (`undefined`: keyless), made once. */
  protected abstract newClient(apiKey: string | undefined): Promise<Client>

  /** One attempt at the response; throws the adapter's `LlmError` (or an `AbortError`). */
  protected abstract attempt(client: Client, request: LlmRequest): AsyncGenerator<LlmChunk>

  /** The wait the server asked for, read from a failure of `attempt`. */
  protected abstract retryAfterMs(error: unknown): number | undefined

  /**
   * Streams one response. A failure worth retrying (429, 5xx, no answer, a connection that
   * broke) before any chunk was passed on is retried after the server's `Retry-After` or
   * an exponential backoff, within `maxRetries` and `retryBudgetMs`; aborting the request
   * ends a wait at once. Once a chunk was passed on, a failure ends the stream: retrying
   * then would repeat what the caller already has.
   */
  async *stream(request: LlmRequest): AsyncGenerator<LlmChunk> {
    const { name, baseURL, apiKeyEnv } = this.config
    if (request.signal.aborted) throw abortErrorOf(request.signal)
    if (!this.keyless && !this.apiKey) {
      throw new this.AdapterError('NO_API_KEY', `${name}: no API key: set the ${apiKeyEnv} environment variable (the "${name}" adapter talks to ${baseURL})`)
    }
    this.client ??= this.newClient(this.apiKey)
    const client = await this.client
    const budget = new RetryBudget(this.config, (error) => this.retryAfterMs(error))
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
}
