import Schema from 'schemastery'

/** One endpoint: the plugin can be loaded once per provider, each under its own `name`. */
export interface OpenAIChatConfig {
  name: string
  baseURL: string
  model: string
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
export const OpenAIChatConfig: Schema<Partial<OpenAIChatConfig>, OpenAIChatConfig> = Schema.object({
  name: Schema.string().default('deepseek').description('Adapter registry name: the `name:` prefix of model specs.'),
  baseURL: Schema.string()
    .pattern(/^https?:\/\/\S+$/)
    .default('https://api.deepseek.com')
    .description('Base URL of the OpenAI-compatible API (the part before `/chat/completions`).'),
  model: Schema.string().default('deepseek-chat').description('Model used when a spec names only the adapter.'),
  apiKeyEnv: Schema.string().default('DEEPSEEK_API_KEY').description('Environment variable holding the API key, read when the plugin starts.'),
  maxRetries: Schema.natural().default(3).description('Retries of a request that failed with 429, 5xx, no answer or a broken connection before any of the response arrived. 0 surfaces errors at once.'),
  retryBaseDelayMs: Schema.natural().min(1).default(500).description('First backoff between retries when the server gives no Retry-After; doubles each retry (with jitter).'),
  retryMaxDelayMs: Schema.natural().min(1).default(30_000).description('Largest single backoff.'),
  retryBudgetMs: Schema.natural().default(120_000).description('Most time one request may spend waiting between retries, Retry-After included; a longer wait gives up at once.'),
  timeoutMs: Schema.natural().min(1).default(600_000).description('Longest wait for the response to start, and for each next chunk once it streams.'),
  replayReasoning: Schema.boolean()
    .default(true)
    .description('Resend logged reasoning as `reasoning_content` on assistant messages that made tool calls (DeepSeek thinking mode rejects tool-call history without it).'),
})
