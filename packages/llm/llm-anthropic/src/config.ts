import { keyEnvFor, NO_KEY, type VendorKey } from '@dsh/llm'
import Schema from 'schemastery'

/** Anthropic's API, the one endpoint `ANTHROPIC_API_KEY` is a default for. */
export const ANTHROPIC: VendorKey = { origin: 'https://api.anthropic.com', keyEnv: 'ANTHROPIC_API_KEY' }
/** `apiKeyEnv: none`: the server takes no key, and no `Authorization` header is sent (`@dsh/llm`'s, every adapter's). */
export { NO_KEY }

/** One Messages endpoint: the plugin can be loaded once per provider, each under its own `name`. */
export interface AnthropicConfig {
  name: string
  baseURL: string
  model: string
  /** The variable holding the key, or `none`. Optional in a config only for Anthropic's own origin (see `resolveApiKeyEnv`). */
  apiKeyEnv: string
  maxTokens: number
  promptCaching: boolean
  maxRetries: number
  retryBaseDelayMs: number
  retryMaxDelayMs: number
  retryBudgetMs: number
  timeoutMs: number
}

/** Validating fills every default, so the adapter never defaults anything on its run path. */
export const AnthropicConfig: Schema<Partial<AnthropicConfig>, ValidatedConfig> = Schema.object({
  name: Schema.string().default('anthropic').description('Adapter registry name: the `name:` prefix of model specs.'),
  baseURL: Schema.string()
    .pattern(/^https?:\/\/\S+$/)
    .default(ANTHROPIC.origin)
    .description('Base URL of the Messages API (the part before `/v1/messages`).'),
  model: Schema.string().default('claude-sonnet-4-5').description('Model used when a spec names only the adapter.'),
  apiKeyEnv: Schema.string()
    .pattern(/^[A-Za-z_][A-Za-z0-9_]*$/)
    .description(`Environment variable holding the API key, read when the plugin starts; \`${NO_KEY}\` for a server that takes none. Defaults to ${ANTHROPIC.keyEnv} only for ${ANTHROPIC.origin}.`),
  maxTokens: Schema.natural().min(1).default(8192).description('max_tokens of every request (the Messages API requires one): the longest answer one response may have.'),
  promptCaching: Schema.boolean().default(true).description('Mark cache breakpoints (cache_control) so a prefix the provider has seen, a forked parent\'s included, is read from its cache.'),
  maxRetries: Schema.natural().default(3).description('Retries of a request that failed with 429, 5xx (529 overloaded included), no answer or a broken connection before any of the response arrived. 0 surfaces errors at once.'),
  retryBaseDelayMs: Schema.natural().min(1).default(500).description('First backoff between retries when the server gives no retry-after; doubles each retry (with jitter).'),
  retryMaxDelayMs: Schema.natural().min(1).default(30_000).description('Largest single backoff.'),
  retryBudgetMs: Schema.natural().default(120_000).description('Most time one request may spend waiting between retries, retry-after included; a longer wait gives up at once.'),
  timeoutMs: Schema.natural().min(1).default(600_000).description('Longest wait for the response to start, and for each next event once it streams.'),
})

/** What the schema gives: every default filled in but the key variable, which depends on the URL. */
export type ValidatedConfig = Omit<AnthropicConfig, 'apiKeyEnv'> & { apiKeyEnv?: string }

/**
 * The key variable of an endpoint, or `undefined` when the config must name one:
 * `ANTHROPIC_API_KEY` is the default for Anthropic's own origin alone (the check every
 * adapter shares, `@dsh/llm`'s `keyEnvFor`), so a proxy or a local server is never sent it
 * because a line was left out.
 */
export function resolveApiKeyEnv(config: Pick<ValidatedConfig, 'baseURL' | 'apiKeyEnv'>): string | undefined {
  return keyEnvFor(config, ANTHROPIC)
}
