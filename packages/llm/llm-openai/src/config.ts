import { isAtOrigin, keyEnvFor, NO_KEY } from '@dsh/llm'
import Schema from 'schemastery'

/** Where DeepSeek's API is: the one endpoint its key variable is a default for. */
export const DEEPSEEK_ORIGIN = 'https://api.deepseek.com'
export const DEEPSEEK_KEY_ENV = 'DEEPSEEK_API_KEY'
/** `apiKeyEnv: none`: the server takes no key, and no `Authorization` header is sent (`@dsh/llm`'s, every adapter's). */
export { NO_KEY }

/** One endpoint: the plugin can be loaded once per provider, each under its own `name`. */
export interface OpenAIChatConfig {
  name: string
  baseURL: string
  model: string
  /**
   * The variable holding the key, or `none` for a server that takes no key. Optional in a
   * config only for DeepSeek's own URL (see `resolveApiKeyEnv`).
   */
  apiKeyEnv: string
  maxRetries: number
  retryBaseDelayMs: number
  retryMaxDelayMs: number
  retryBudgetMs: number
  timeoutMs: number
  replayReasoning: boolean
}

/**
 * The config schema is also the one `resolve` step for adapter options: validating fills
 * every default, so the adapter never defaults anything on its run path.
 */
export const OpenAIChatConfig: Schema<Partial<OpenAIChatConfig>, ValidatedConfig> = Schema.object({
  name: Schema.string().default('deepseek').description('Adapter registry name: the `name:` prefix of model specs.'),
  baseURL: Schema.string()
    .pattern(/^https?:\/\/\S+$/)
    .default('https://api.deepseek.com')
    .description('Base URL of the OpenAI-compatible API (the part before `/chat/completions`).'),
  model: Schema.string().default('deepseek-chat').description('Model used when a spec names only the adapter.'),
  apiKeyEnv: Schema.string()
    .pattern(/^[A-Za-z_][A-Za-z0-9_]*$/)
    .description(`Environment variable holding the API key, read when the plugin starts; \`${NO_KEY}\` for a server that takes none. Defaults to ${DEEPSEEK_KEY_ENV} only for DeepSeek's own URL.`),
  maxRetries: Schema.natural().default(3).description('Retries of a request that failed with 429, 5xx, no answer or a broken connection before any of the response arrived. 0 surfaces errors at once.'),
  retryBaseDelayMs: Schema.natural().min(1).default(500).description('First backoff between retries when the server gives no Retry-After; doubles each retry (with jitter).'),
  retryMaxDelayMs: Schema.natural().min(1).default(30_000).description('Largest single backoff.'),
  retryBudgetMs: Schema.natural().default(120_000).description('Most time one request may spend waiting between retries, Retry-After included; a longer wait gives up at once.'),
  timeoutMs: Schema.natural().min(1).default(600_000).description('Longest wait for the response to start, and for each next chunk once it streams.'),
  replayReasoning: Schema.boolean()
    .default(true)
    .description('Resend logged reasoning as `reasoning_content` on assistant messages that made tool calls (DeepSeek thinking mode rejects tool-call history without it).'),
})

/** What the schema gives: every default filled in but the key variable, which depends on the URL. */
export type ValidatedConfig = Omit<OpenAIChatConfig, 'apiKeyEnv'> & { apiKeyEnv?: string }

/** Whether `baseURL` is DeepSeek's own API (any path under its origin). */
export function isDeepSeekURL(baseURL: string): boolean {
  return isAtOrigin(baseURL, DEEPSEEK_ORIGIN)
}

/**
 * The key variable of an endpoint, or `undefined` when the config must name one: the DeepSeek
 * variable is the default for DeepSeek's URL alone (`@dsh/llm`'s `keyEnvFor`, the one check
 * every adapter shares), so a local or third-party server is never sent the DeepSeek key
 * because a line was left out.
 */
export function resolveApiKeyEnv(config: Pick<ValidatedConfig, 'baseURL' | 'apiKeyEnv'>): string | undefined {
  return keyEnvFor(config, { origin: DEEPSEEK_ORIGIN, keyEnv: DEEPSEEK_KEY_ENV })
}
