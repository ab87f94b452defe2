/**
 * ANTHROPIC_API_KEY goes only to Anthropic's origin: any other base URL names its own
 * variable (or `none`), the SDK's own fallbacks are never read, and its
 * ANTHROPIC_CUSTOM_HEADERS are not sent. Each test asserts on the headers the fake server saw,
 * with every key variable set so that a leak would show.
 */
import { LlmService } from '@dsh/llm'
import { Context } from 'cordis'
import { describe, expect, it } from 'vitest'
import Anthropic, { AnthropicAdapter, AnthropicError } from '../src/index.js'
import { collect, failureOf, fakeServer, requestOf } from './helpers.js'

const SECRETS = { ANTHROPIC_API_KEY: 'sk-ant-secret', ANTHROPIC_AUTH_TOKEN: 'sk-ant-token-secret', ANTHROPIC_CUSTOM_HEADERS: 'X-Proxy-Secret: proxy-secret' }

function leaked(server: Awaited<ReturnType<typeof fakeServer>>): string[] {
  const wire = JSON.stringify(server.requests.map((request) => request.headers))
  return ['sk-ant-secret', 'sk-ant-token-secret', 'proxy-secret'].filter((secret) => wire.includes(secret))
}

describe('where the Anthropic key is sent', () => {
  it('refuses to load another base URL that names no key variable, in one line naming the fix', async () => {
    const server = await fakeServer([{ text: 'unused' }])
    const ctx = new Context()
    await ctx.plugin(LlmService)
    const error = await Promise.resolve(ctx.plugin(Anthropic, { name: 'proxy', baseURL: server.url })).then(
      () => undefined,
      (failure: unknown) => failure,
    )
    expect(error).toBeInstanceOf(AnthropicError)
    expect((error as Error).message).toBe(
      `proxy: baseURL ${server.url} is not Anthropic's (https://api.anthropic.com), so ANTHROPIC_API_KEY is not sent there: set apiKeyEnv to the variable holding this endpoint's key, or apiKeyEnv: none for a server that takes no key`,
    )
    expect(ctx.llm.list()).toEqual([])
    expect(server.requests).toHaveLength(0)
  })

  it('defaults to ANTHROPIC_API_KEY for Anthropic\'s origin alone, look-alikes refused', () => {
    for (const baseURL of ['https://api.anthropic.com', 'https://api.anthropic.com/']) expect(new AnthropicAdapter({ baseURL, env: SECRETS }).config.apiKeyEnv).toBe('ANTHROPIC_API_KEY')
    for (const baseURL of ['https://api.anthropic.com.evil.test', 'http://api.anthropic.com', 'https://api.anthropic.com:8443']) {
      expect(() => new AnthropicAdapter({ baseURL, env: SECRETS })).toThrow(/is not Anthropic's/)
    }
  })

  it('sends no key and none of the SDK\'s variables to a server configured with apiKeyEnv: none', async () => {
    const server = await fakeServer([{ text: 'hello' }])
    const adapter = new AnthropicAdapter({ baseURL: server.url, apiKeyEnv: 'none', maxRetries: 0, env: SECRETS })
    const saved = { ...process.env }
    Object.assign(process.env, SECRETS)
    try {
      expect((await collect(adapter.stream(requestOf()))).at(-1)).toEqual({ type: 'finish', reason: 'stop' })
    } finally {
      for (const name of Object.keys(SECRETS)) if (saved[name] === undefined) delete process.env[name]
    }
    expect(server.requests[0]!.headers.authorization).toBeUndefined()
    expect(server.requests[0]!.headers['x-api-key']).toBeUndefined()
    expect(leaked(server)).toEqual([])
  })

  it('sends exactly the named variable to a server that names one, and no other key', async () => {
    const server = await fakeServer([{ text: 'hello' }])
    const adapter = new AnthropicAdapter({ baseURL: server.url, apiKeyEnv: 'PROXY_KEY', maxRetries: 0, env: { ...SECRETS, PROXY_KEY: 'sk-proxy' } })
    await collect(adapter.stream(requestOf()))
    expect(server.requests[0]!.headers.authorization).toBe('Bearer sk-proxy')
    expect(leaked(server)).toEqual([])
  })

  it('fails a request whose variable is empty, naming it and the endpoint, and sends nothing', async () => {
    const server = await fakeServer([{ text: 'unused' }])
    const adapter = new AnthropicAdapter({ name: 'proxy', baseURL: server.url, apiKeyEnv: 'EMPTY_KEY', env: { EMPTY_KEY: '', ...SECRETS } })
    const error = await failureOf(adapter.stream(requestOf()))
    expect(error.message).toBe(`proxy: no API key: set the EMPTY_KEY environment variable (the "proxy" adapter talks to ${server.url})`)
    expect(server.requests).toHaveLength(0)
  })
})
