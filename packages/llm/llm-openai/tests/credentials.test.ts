/**
 * A key goes only to the endpoint it was configured for: the DeepSeek variable is a
 * default for DeepSeek's URL alone, `apiKeyEnv: none` sends no `Authorization` at all, and
 * the SDK's own fallbacks (`OPENAI_API_KEY`) are never read. Each test starts a fake
 * endpoint and asserts the header it received, with every key variable set in the
 * environment so that a leak would show.
 */
import { LlmService } from '@dsh/llm'
import { startFakeOpenAIChat, type FakeOpenAIChat } from '@dsh/testkit'
import { Context } from 'cordis'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import OpenAIChat, { OpenAIChatAdapter, OpenAIChatError } from '../src/index.js'
import { collect, failureOf, requestOf } from './helpers.js'

const SECRETS = { DEEPSEEK_API_KEY: 'sk-deepseek-secret', OPENAI_API_KEY: 'sk-openai-secret' }
const saved: Record<string, string | undefined> = {}
const servers: FakeOpenAIChat[] = []

beforeEach(() => {
  for (const [name, value] of Object.entries(SECRETS)) {
    saved[name] = process.env[name]
    process.env[name] = value
  }
})

afterEach(async () => {
  for (const name of Object.keys(SECRETS)) {
    if (saved[name] === undefined) delete process.env[name]
    else process.env[name] = saved[name]
  }
  await Promise.all(servers.splice(0).map((server) => server.close()))
})

async function fakeServer(): Promise<FakeOpenAIChat> {
  const server = await startFakeOpenAIChat([{ text: 'hello' }, { text: 'again' }])
  servers.push(server)
  return server
}

function sentSecrets(server: FakeOpenAIChat): string[] {
  return server.requests.flatMap((request) => Object.values(SECRETS).filter((secret) => JSON.stringify(request.headers).includes(secret)))
}

describe('where a key is sent', () => {
  it('refuses to load an endpoint that is not DeepSeek and names no key variable, before any request, with the DeepSeek key set', async () => {
    const server = await fakeServer()
    const ctx = new Context()
    await ctx.plugin(LlmService)
    const fiber = ctx.plugin(OpenAIChat, { name: 'local', baseURL: server.url, model: 'qwen' })
    const error = await Promise.resolve(fiber).then(
      () => undefined,
      (failure: unknown) => failure,
    )
    expect(error).toBeInstanceOf(OpenAIChatError)
    expect((error as Error).message).toBe(
      `local: baseURL ${server.url} is not DeepSeek's, so the DeepSeek key is not sent there: set apiKeyEnv to the variable holding this endpoint's key, or apiKeyEnv: none for a server that takes no key`,
    )
    expect(ctx.llm.list()).toEqual([])
    expect(server.requests).toHaveLength(0)
  })

  it('sends no Authorization header at all to an endpoint configured with apiKeyEnv: none', async () => {
    const server = await fakeServer()
    const adapter = new OpenAIChatAdapter({ name: 'local', baseURL: server.url, apiKeyEnv: 'none', maxRetries: 0 })
    const chunks = await collect(adapter.stream(requestOf()))
    expect(chunks.at(-1)).toEqual({ type: 'finish', reason: 'stop' })
    expect(server.requests).toHaveLength(1)
    expect(server.requests[0]!.headers.authorization).toBeUndefined()
    expect(sentSecrets(server)).toEqual([])
  })

  it('sends exactly the named variable to an endpoint that names one, and never the DeepSeek or OpenAI key', async () => {
    const server = await fakeServer()
    process.env.DSH_TEST_LOCAL_KEY = 'sk-local-only'
    try {
      const adapter = new OpenAIChatAdapter({ name: 'local', baseURL: server.url, apiKeyEnv: 'DSH_TEST_LOCAL_KEY', maxRetries: 0 })
      await collect(adapter.stream(requestOf()))
      expect(server.requests[0]!.headers.authorization).toBe('Bearer sk-local-only')
      expect(sentSecrets(server)).toEqual([])
    } finally {
      delete process.env.DSH_TEST_LOCAL_KEY
    }
  })

  it('fails a request to an endpoint whose named variable is empty with one line naming the variable and the endpoint, and sends nothing', async () => {
    const server = await fakeServer()
    const adapter = new OpenAIChatAdapter({ name: 'local', baseURL: server.url, apiKeyEnv: 'DSH_TEST_EMPTY_KEY', env: { DSH_TEST_EMPTY_KEY: '', ...SECRETS }, maxRetries: 0 })
    const error = await failureOf(adapter.stream(requestOf()))
    expect(error.message).toBe(`local: no API key: set the DSH_TEST_EMPTY_KEY environment variable (the "local" adapter talks to ${server.url})`)
    expect(server.requests).toHaveLength(0)
  })

  it('still defaults to DEEPSEEK_API_KEY for DeepSeek\'s own URL, with or without a path', () => {
    for (const baseURL of ['https://api.deepseek.com', 'https://api.deepseek.com/v1', 'https://api.deepseek.com/beta/']) {
      expect(new OpenAIChatAdapter({ baseURL }).config.apiKeyEnv).toBe('DEEPSEEK_API_KEY')
    }
    // Look-alikes are other hosts.
    for (const baseURL of ['https://api.deepseek.com.evil.test/v1', 'http://api.deepseek.com', 'https://api.deepseek.com:8443']) {
      expect(() => new OpenAIChatAdapter({ baseURL })).toThrow(/is not DeepSeek's/)
    }
  })

  it('says that no key was sent when a keyless endpoint answers 401', async () => {
    const server = await startFakeOpenAIChat([{ status: 401, error: { message: 'key required', type: 'authentication_error' } }])
    servers.push(server)
    const adapter = new OpenAIChatAdapter({ name: 'local', baseURL: server.url, apiKeyEnv: 'none', maxRetries: 0 })
    const error = await failureOf(adapter.stream(requestOf()))
    expect(error.message).toContain('no key was sent, as apiKeyEnv: none says')
  })
})
