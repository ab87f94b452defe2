import { LlmError, LlmService } from '@dsh/llm'
import { startFakeOpenAIChat } from '@dsh/testkit'
import { Context } from 'cordis'
import { afterEach, describe, expect, it } from 'vitest'
import OpenAIChat from '../src/index.js'
import { collect, failureOf, requestOf } from './helpers.js'

const KEY_VAR = 'DSH_LLM_OPENAI_TEST_KEY'
const MISSING_VAR = 'DSH_LLM_OPENAI_TEST_UNSET_KEY'

afterEach(() => {
  delete process.env[KEY_VAR]
})

async function contextWithLlm() {
  const ctx = new Context()
  await ctx.plugin(LlmService)
  return ctx
}

describe('the plugin', () => {
  it('registers a deepseek adapter with the DeepSeek defaults', async () => {
    const ctx = await contextWithLlm()
    await ctx.plugin(OpenAIChat)
    expect(ctx.llm.list()).toEqual(['deepseek'])
    const resolved = ctx.llm.resolve('deepseek')
    expect(resolved.model).toBe('deepseek-chat')
    expect(resolved.adapter).toMatchObject({ config: { baseURL: 'https://api.deepseek.com', apiKeyEnv: 'DEEPSEEK_API_KEY', maxRetries: 3, retryBudgetMs: 120_000 } })
  })

  it('registers under its configured name and streams from its configured endpoint with the key from its env var', async () => {
    const server = await startFakeOpenAIChat([{ text: 'hello from the fake' }])
    try {
      process.env[KEY_VAR] = 'sk-from-env'
      const ctx = await contextWithLlm()
      await ctx.plugin(OpenAIChat, { name: 'local', baseURL: server.url, model: 'gpt-4.1', apiKeyEnv: KEY_VAR })
      const { adapter, model } = ctx.llm.resolve('local')
      expect(model).toBe('gpt-4.1')
      const chunks = await collect(adapter.stream(requestOf({ model })))
      expect(chunks.at(-1)).toEqual({ type: 'finish', reason: 'stop' })
      expect(server.requests[0]?.headers.authorization).toBe('Bearer sk-from-env')
      expect(server.requests[0]?.body).toMatchObject({ model: 'gpt-4.1' })
    } finally {
      await server.close()
    }
  })

  it('loads twice side by side under different names, and unregisters with its fiber', async () => {
    const ctx = await contextWithLlm()
    await ctx.plugin(OpenAIChat)
    const openai = await ctx.plugin(OpenAIChat, { name: 'openai', baseURL: 'https://api.openai.com/v1', apiKeyEnv: 'OPENAI_API_KEY', model: 'gpt-4.1' })
    expect(ctx.llm.list().sort()).toEqual(['deepseek', 'openai'])
    expect(ctx.llm.resolve('openai').model).toBe('gpt-4.1')
    await openai.dispose()
    expect(ctx.llm.list()).toEqual(['deepseek'])
  })

  it('loads without its key and fails requests with an LlmError naming the variable', async () => {
    delete process.env[MISSING_VAR]
    const ctx = await contextWithLlm()
    await ctx.plugin(OpenAIChat, { name: 'nokey', apiKeyEnv: MISSING_VAR })
    const { adapter, model } = ctx.llm.resolve('nokey')
    const error = await failureOf(adapter.stream(requestOf({ model })))
    expect(error).toBeInstanceOf(LlmError)
    expect(error.message).toContain(`set the ${MISSING_VAR} environment variable`)
  })

  it('rejects a config whose baseURL is not an http(s) URL, at load', async () => {
    const ctx = await contextWithLlm()
    const fiber = ctx.plugin(OpenAIChat, { baseURL: 'api.deepseek.com' })
    await expect(Promise.resolve(fiber).then(() => {})).rejects.toThrow(/baseURL/)
    expect(ctx.llm.list()).toEqual([])
  })
})
