import { LlmError } from '@dsh/llm'
import { createHarness, type Harness } from '@dsh/testkit/harness'
import type { ChatCompletionCreateParamsStreaming } from 'openai/resources/chat/completions'
import { afterEach, describe, expect, it } from 'vitest'
import OpenAIChat from '../src/index.js'
import { backoffMs, RetryBudget } from '../src/retry.js'
import { collect, failureOf, fakeEndpoint, requestOf } from './helpers.js'

const KEY_VAR = 'DSH_DEEPSEEK_SPECIFICS_TEST_KEY'
let harness: Harness | undefined
afterEach(async () => {
  await harness?.dispose()
  harness = undefined
  delete process.env[KEY_VAR]
})

describe('reasoning content (deepseek-reasoner)', () => {
  it('is streamed, stored in the session, and not sent back on a later turn', async () => {
    const { server } = await fakeEndpoint([
      { reasoning: ['Two plus ', 'two is four.'], text: 'Four.' },
      { text: 'Still four.' },
    ])
    process.env[KEY_VAR] = 'sk-test'
    harness = await createHarness()
    await harness.plugin(OpenAIChat, { name: 'fake', baseURL: server.url, model: 'deepseek-reasoner', apiKeyEnv: KEY_VAR })
    const agent = await harness.agent({ agentOptions: { model: 'fake:deepseek-reasoner' } })
    expect((await agent.followup('What is 2+2?')).reason).toBe('completed')
    const answer = agent.session.messages().toArray().find((message) => message.role === 'assistant')!
    expect(answer.content).toEqual([{ type: 'reasoning', text: 'Two plus two is four.' }, { type: 'text', text: 'Four.' }])
    expect((await agent.followup('Sure?')).reason).toBe('completed')
    const second = server.requests[1]!.body as ChatCompletionCreateParamsStreaming
    expect(second.messages[2]).toEqual({ role: 'assistant', content: 'Four.' })
    expect(server.requests[1]!.rawBody).not.toContain('reasoning')
  })
})

describe('cache-hit usage', () => {
  it("records DeepSeek's prompt_cache_hit_tokens as cacheHitInputTokens", async () => {
    const { adapter } = await fakeEndpoint([{ text: 'ok', usage: { promptTokens: 1200, completionTokens: 5, cacheHitTokens: 1024 } }])
    const chunks = await collect(adapter.stream(requestOf()))
    expect(chunks).toContainEqual({ type: 'usage', usage: { inputTokens: 1200, outputTokens: 5, cacheHitInputTokens: 1024 } })
  })

  it("records OpenAI's prompt_tokens_details.cached_tokens as cacheHitInputTokens", async () => {
    const { adapter } = await fakeEndpoint([{ text: 'ok', usage: { promptTokens: 2048, completionTokens: 7, cachedTokens: 1920 } }])
    const chunks = await collect(adapter.stream(requestOf()))
    expect(chunks).toContainEqual({ type: 'usage', usage: { inputTokens: 2048, outputTokens: 7, cacheHitInputTokens: 1920 } })
  })

  it('leaves cacheHitInputTokens out when the provider does not report it', async () => {
    const { adapter } = await fakeEndpoint([{ text: 'ok', usage: { promptTokens: 10, completionTokens: 2 } }])
    expect(await collect(adapter.stream(requestOf()))).toContainEqual({ type: 'usage', usage: { inputTokens: 10, outputTokens: 2 } })
  })

  it('is stored with the assistant message of the turn', async () => {
    const { server } = await fakeEndpoint([{ text: 'ok', usage: { promptTokens: 100, completionTokens: 3, cacheHitTokens: 64 } }])
    process.env[KEY_VAR] = 'sk-test'
    harness = await createHarness()
    await harness.plugin(OpenAIChat, { name: 'fake', baseURL: server.url, model: 'deepseek-chat', apiKeyEnv: KEY_VAR })
    const agent = await harness.agent({ agentOptions: { model: 'fake:deepseek-chat' } })
    await agent.followup('hi')
    const event = agent.session.events().find((candidate) => candidate.type === 'assistant/message')
    expect(event).toMatchObject({ usage: { inputTokens: 100, outputTokens: 3, cacheHitInputTokens: 64 } })
  })
})

describe('retries', () => {
  it('a 429 with Retry-After is retried after the wait the server asked for, then succeeds', async () => {
    // A backoff of a minute would time the test out: only the server's one second lets it pass.
    const { server, adapter } = await fakeEndpoint([{ status: 429, error: 'slow down', errorHeaders: { 'retry-after': '1' } }, { text: 'welcome back' }], { maxRetries: 2, retryBaseDelayMs: 60_000 })
    const started = Date.now()
    const chunks = await collect(adapter.stream(requestOf()))
    expect(Date.now() - started).toBeGreaterThanOrEqual(950)
    expect(server.requests).toHaveLength(2)
    expect(chunks.filter((chunk) => chunk.type === 'text-delta').map((chunk) => (chunk.type === 'text-delta' ? chunk.text : '')).join('')).toBe('welcome back')
  })

  it('a connection dropped before any of the response is retried', async () => {
    const { server, adapter } = await fakeEndpoint([{ text: 'lost', dropAfterChunks: 0 }, { text: 'found' }], { maxRetries: 1, retryBaseDelayMs: 1 })
    const chunks = await collect(adapter.stream(requestOf()))
    expect(chunks.at(-1)).toEqual({ type: 'finish', reason: 'stop' })
    expect(server.requests).toHaveLength(2)
  })

  it('a stream dropped after text was passed on is not retried (that would repeat the text)', async () => {
    const { server, adapter } = await fakeEndpoint([{ text: 'one two three four', dropAfterChunks: 3 }, { text: 'unused' }], { maxRetries: 3, retryBaseDelayMs: 1 })
    const error = await failureOf(adapter.stream(requestOf()))
    expect(error).toMatchObject({ code: 'CONNECTION_LOST' })
    expect(server.requests).toHaveLength(1)
  })

  it('aborting the request during a retry wait ends it at once with an AbortError', async () => {
    const { server, adapter } = await fakeEndpoint([{ status: 503, error: 'busy', errorHeaders: { 'retry-after': '60' } }, { text: 'never' }], { maxRetries: 3 })
    const controller = new AbortController()
    const failure = failureOf(adapter.stream(requestOf({ signal: controller.signal })))
    await waitFor(() => server.requests.length === 1)
    await server.requests[0]!.closed
    controller.abort()
    expect((await failure).name).toBe('AbortError')
    expect(server.requests).toHaveLength(1)
  })

  it('gives up at once when Retry-After is longer than the retry budget, saying so', async () => {
    const { server, adapter } = await fakeEndpoint([{ status: 429, error: 'quota', errorHeaders: { 'retry-after': '3600' } }], { maxRetries: 3, retryBudgetMs: 10_000 })
    const error = await failureOf(adapter.stream(requestOf()))
    expect(error).toMatchObject({ code: 'RATE_LIMITED', status: 429 })
    expect(error.message).toMatch(/asked to wait 3600000 ms.*retryBudgetMs/)
    expect(server.requests).toHaveLength(1)
  })

  it('stops after maxRetries and names how many were made', async () => {
    const { server, adapter } = await fakeEndpoint([500, 502, 503].map((status) => ({ status, error: 'down' })), { maxRetries: 2, retryBaseDelayMs: 1 })
    const error = await failureOf(adapter.stream(requestOf()))
    expect(error).toBeInstanceOf(LlmError)
    expect(error).toMatchObject({ code: 'HTTP_SERVER', status: 503 })
    expect(error.message).toMatch(/gave up after 2 retries/)
    expect(server.requests).toHaveLength(3)
  })

  it('does not retry a client error', async () => {
    const { server, adapter } = await fakeEndpoint([{ status: 400, error: 'bad request' }, { text: 'unused' }], { maxRetries: 3, retryBaseDelayMs: 1 })
    expect(await failureOf(adapter.stream(requestOf()))).toMatchObject({ code: 'HTTP_CLIENT' })
    expect(server.requests).toHaveLength(1)
  })

  it('backoff doubles per retry, stays within its cap, and the budget bounds the total wait', () => {
    const policy = { maxRetries: 10, retryBaseDelayMs: 100, retryMaxDelayMs: 1000, retryBudgetMs: 1500 }
    expect([0, 1, 2, 3, 4].map((retry) => backoffMs(policy, retry, () => 1))).toEqual([100, 200, 400, 800, 1000])
    expect(backoffMs(policy, 0, () => 0)).toBe(75)
    const budget = new RetryBudget(policy)
    const busy = new LlmError('HTTP_SERVER', 'busy', { status: 503 })
    const waits: number[] = []
    for (let step = budget.next(busy); 'waitMs' in step; step = budget.next(busy)) waits.push(step.waitMs)
    expect(waits.reduce((sum, wait) => sum + wait, 0)).toBeLessThanOrEqual(1500)
  })
})

/** Resolves once `condition` holds, checking at each turn of the event loop. */
async function waitFor(condition: () => boolean): Promise<void> {
  while (!condition()) await new Promise((resolve) => setImmediate(resolve))
}
