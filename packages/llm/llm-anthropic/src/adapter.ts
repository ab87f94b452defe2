import { abortErrorOf, QuietTimer, SdkAdapter, type LlmChunk, type LlmRequest, type SdkEndpointOptions } from '@dsh/llm'
import type Anthropic from '@anthropic-ai/sdk'
import { AnthropicConfig, resolveApiKeyEnv } from './config.js'
import { AnthropicError, retryAfterMs, toLlmError } from './errors.js'
import { EventReader } from './from-wire.js'
import { toMessagesRequest } from './to-wire.js'
import { loadSdk } from './sdk.js'

export interface AnthropicAdapterOptions extends Partial<AnthropicConfig>, SdkEndpointOptions {}

/**
 * An `LlmAdapter` for Anthropic's Messages API through the official SDK. The key, the
 * client made on the first request and the retries (429, 5xx with 529 overloaded, no
 * answer, a broken connection) are `@dsh/llm`'s `SdkAdapter`'s, as every SDK-backed adapter
 * has them: a missing key does not stop the adapter from loading, it makes each request
 * fail with an `LlmError` naming the variable to set.
 */
export class AnthropicAdapter extends SdkAdapter<AnthropicConfig, Anthropic> {
  constructor(options: AnthropicAdapterOptions = {}) {
    const { apiKey, env, ...config } = options
    super({
      config: AnthropicConfig(config),
      apiKey,
      env,
      keyEnvOf: resolveApiKeyEnv,
      notTheVendors: "is not Anthropic's (https://api.anthropic.com), so ANTHROPIC_API_KEY is not sent there",
      sdkLogEnv: 'ANTHROPIC_LOG',
      Error: AnthropicError,
    })
  }

  protected async newClient(apiKey: string | undefined): Promise<Anthropic> {
    const { default: AnthropicClient } = await loadSdk()
    return new AnthropicClient({
      // Given in code, a credential is the client's only one: the SDK then reads no
      // ANTHROPIC_API_KEY / ANTHROPIC_AUTH_TOKEN and no profile or credentials file. A
      // keyless endpoint gets a placeholder that the null header below keeps off the wire.
      apiKey: apiKey ?? 'unused',
      baseURL: this.config.baseURL,
      defaultHeaders: this.unsentHeaders(apiKey),
      // Retries are ours (see `SdkAdapter.stream`): the SDK's wait cannot be cancelled.
      maxRetries: 0,
      timeout: this.config.timeoutMs,
      // dsh's own tracing records model calls; the SDK's spans and trace headers would
      // send trace context to whatever endpoint this is.
      openTelemetry: false,
      // Our errors carry what the SDK would print to the console (which a TUI or an ACP
      // session must not get); ANTHROPIC_LOG still turns its logging on for debugging.
      logLevel: this.sdkLogLevel,
    })
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

  protected retryAfterMs(error: unknown): number | undefined {
    return retryAfterMs(error)
  }

  protected async *attempt(client: Anthropic, request: LlmRequest): AsyncGenerator<LlmChunk> {
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
