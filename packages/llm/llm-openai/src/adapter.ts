import { QuietTimer, SdkAdapter, type LlmChunk, type LlmRequest, type SdkEndpointOptions } from '@dsh/llm'
import type OpenAI from 'openai'
import { OpenAIChatConfig, resolveApiKeyEnv } from './config.js'
import { abortError, OpenAIChatError, toLlmError } from './errors.js'
import { ChunkReader } from './from-wire.js'
import { toChatRequest } from './to-wire.js'
import { retryAfterMs } from './retry.js'
import { loadSdk } from './sdk.js'

export interface OpenAIChatAdapterOptions extends Partial<OpenAIChatConfig>, SdkEndpointOptions {}

/**
 * An `LlmAdapter` for OpenAI-compatible chat completions through the official SDK,
 * DeepSeek by default. The key, the client made on the first request and the retries are
 * `@dsh/llm`'s `SdkAdapter`'s, as every SDK-backed adapter has them: a missing key does not
 * stop the adapter from loading, it makes each request fail with an `LlmError` naming the
 * variable to set.
 */
export class OpenAIChatAdapter extends SdkAdapter<OpenAIChatConfig, OpenAI> {
  constructor(options: OpenAIChatAdapterOptions = {}) {
    const { apiKey, env, ...config } = options
    super({
      config: OpenAIChatConfig(config),
      apiKey,
      env,
      keyEnvOf: resolveApiKeyEnv,
      notTheVendors: "is not DeepSeek's, so the DeepSeek key is not sent there",
      sdkLogEnv: 'OPENAI_LOG',
      Error: OpenAIChatError,
    })
  }

  protected async newClient(apiKey: string | undefined): Promise<OpenAI> {
    const { default: OpenAIClient } = await loadSdk()
    return new OpenAIClient({
      // Without one the SDK would read OPENAI_API_KEY; a keyless endpoint gets a
      // placeholder that the null header below keeps off the wire.
      apiKey: apiKey ?? 'unused',
      ...(apiKey === undefined && { defaultHeaders: { Authorization: null } }),
      baseURL: this.config.baseURL,
      // Retries are ours (see `SdkAdapter.stream`): the SDK's wait cannot be cancelled, and
      // it does not retry a stream that broke before its first chunk.
      maxRetries: 0,
      timeout: this.config.timeoutMs,
      // Left undefined, the SDK would read OPENAI_ORG_ID / OPENAI_PROJECT_ID and send
      // them to whatever endpoint this is.
      organization: null,
      project: null,
      // Our errors carry what the SDK would print to the console (which a TUI or an ACP
      // session must not get); OPENAI_LOG still turns its logging on for debugging.
      logLevel: this.sdkLogLevel,
    })
  }

  protected retryAfterMs(error: unknown): number | undefined {
    return retryAfterMs(error)
  }

  protected async *attempt(client: OpenAI, request: LlmRequest): AsyncGenerator<LlmChunk> {
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
