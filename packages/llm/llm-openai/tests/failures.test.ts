import { LlmError } from '@dsh/llm'
import { startFakeOpenAIChat } from '@dsh/testkit'
import { describe, expect, it } from 'vitest'
import { OpenAIChatAdapter } from '../src/index.js'
import { collect, failureOf, fakeEndpoint, requestOf } from './helpers.js'

describe('aborting a request', () => {
  it('ends a stream aborted mid-response with an AbortError promptly, and the server sees the connection close', async () => {
    const { server, adapter } = await fakeEndpoint([{ text: 'one two three four five', hangAfterChunks: 3 }])
    const controller = new AbortController()
    const seen: string[] = []
    let abortedAt = 0
    const error = await failureOf(
      (async function* () {
        for await (const chunk of adapter.stream(requestOf({ signal: controller.signal }))) {
          if (chunk.type === 'text-delta') seen.push(chunk.text)
          if (!abortedAt) {
            abortedAt = Date.now()
            controller.abort()
          }
          yield chunk
        }
      })(),
    )
    expect(error.name).toBe('AbortError')
    // The server holds the stream open for ever: ending at all is ending because of the abort.
    expect(seen.length).toBeLessThanOrEqual(2)
    expect(await server.requests[0]!.closed).toEqual({ completed: false })
  })

  it('ends with an AbortError when aborted while waiting for the response to start', async () => {
    // The answer comes after the test's timeout, so only the abort can end this in time.
    const { adapter } = await fakeEndpoint([{ text: 'late', delayMs: 60_000 }])
    const error = await failureOf(adapter.stream(requestOf({ signal: AbortSignal.timeout(100) })))
    expect(error.name).toBe('AbortError')
  })

  it('sends nothing when the signal is already aborted', async () => {
    const { server, adapter } = await fakeEndpoint([{ text: 'unused' }])
    const error = await failureOf(adapter.stream(requestOf({ signal: AbortSignal.abort() })))
    expect(error.name).toBe('AbortError')
    expect(server.requests).toHaveLength(0)
  })

  it('closes the connection when the consumer stops reading early', async () => {
    const { server, adapter } = await fakeEndpoint([{ text: 'one two three', hangAfterChunks: 3 }])
    for await (const chunk of adapter.stream(requestOf())) if (chunk.type === 'text-delta') break
    expect(await server.requests[0]!.closed).toEqual({ completed: false })
  })
})

describe('provider errors', () => {
  it.each([
    [400, 'Model Not Exist', 'HTTP_CLIENT'],
    [402, 'Insufficient Balance', 'HTTP_CLIENT'],
    [403, 'Forbidden', 'AUTH'],
    [429, 'Rate limit reached for requests', 'RATE_LIMITED'],
    [500, 'The server had an error while processing your request', 'HTTP_SERVER'],
    [503, 'Server overloaded, please retry shortly', 'HTTP_SERVER'],
  ])('turns HTTP %i into an LlmError coded by its status class, with the status and the server message, without retrying', async (status, message, code) => {
    const { server, adapter } = await fakeEndpoint([{ status, error: message }])
    const error = await failureOf(adapter.stream(requestOf()))
    expect(error).toBeInstanceOf(LlmError)
    expect(error).toMatchObject({ name: 'OpenAIChatError', code, status })
    expect(error.message).toContain(message)
    expect(error.message).toContain(String(status))
    expect(server.requests).toHaveLength(1)
  })

  it('points at the key variable on 401', async () => {
    const { adapter } = await fakeEndpoint([{ status: 401, error: { message: 'Authentication Fails (no such user)', type: 'authentication_error' } }], { apiKeyEnv: 'MY_PROVIDER_KEY' })
    const error = await failureOf(adapter.stream(requestOf()))
    expect(error).toBeInstanceOf(LlmError)
    expect(error.message).toMatch(/Authentication Fails \(no such user\).*MY_PROVIDER_KEY/)
  })

  it('retries when configured to', async () => {
    const { server, adapter } = await fakeEndpoint([{ status: 503, error: 'busy' }, { text: 'second time lucky' }], { maxRetries: 1 })
    const chunks = await collect(adapter.stream(requestOf()))
    expect(chunks.at(-1)).toEqual({ type: 'finish', reason: 'stop' })
    expect(server.requests).toHaveLength(2)
  })

  it('turns a stream dropped mid-response into an LlmError, not a hang', async () => {
    const { adapter } = await fakeEndpoint([{ text: 'one two three four', dropAfterChunks: 3 }])
    const error = await failureOf(adapter.stream(requestOf()))
    expect(error).toBeInstanceOf(LlmError)
    expect(error.code).toBe('CONNECTION_LOST')
    expect(error.message).toMatch(/broke off/)
  })

  it('turns a connection dropped right after the headers into an LlmError', async () => {
    const { adapter } = await fakeEndpoint([{ text: 'never sent', dropAfterChunks: 0 }])
    expect(await failureOf(adapter.stream(requestOf()))).toBeInstanceOf(LlmError)
  })

  it('gives up on a stream that goes quiet for timeoutMs', async () => {
    // The server holds the stream open for ever: only the stall timeout can end it.
    const { adapter } = await fakeEndpoint([{ text: 'one two three', hangAfterChunks: 2 }], { timeoutMs: 200 })
    const error = await failureOf(adapter.stream(requestOf()))
    expect(error).toBeInstanceOf(LlmError)
    expect(error.code).toBe('STALLED')
    expect(error.message).toMatch(/no data .* for 200 ms/)
  })

  it('gives up on a response that does not start within timeoutMs', async () => {
    const { adapter } = await fakeEndpoint([{ text: 'late', delayMs: 10_000 }], { timeoutMs: 200 })
    const error = await failureOf(adapter.stream(requestOf()))
    expect(error).toBeInstanceOf(LlmError)
    expect(error.code).toBe('TIMEOUT')
    expect(error.message).toMatch(/did not answer within 200 ms/)
  })

  it('says which server it could not reach', async () => {
    const gone = await startFakeOpenAIChat()
    await gone.close()
    const adapter = new OpenAIChatAdapter({ name: 'fake', baseURL: gone.url, apiKey: 'sk-test' })
    const error = await failureOf(adapter.stream(requestOf()))
    expect(error).toBeInstanceOf(LlmError)
    expect(error.message).toContain(`cannot reach ${gone.url}`)
    expect(error.message).toMatch(/ECONNREFUSED/)
    expect(error.code).toBe('UNREACHABLE')
  })
})

describe('a missing API key', () => {
  it('lets the adapter be built, then fails each request with an LlmError naming the variable', async () => {
    const server = await startFakeOpenAIChat([{ text: 'unused' }])
    try {
      // OPENAI_API_KEY must not stand in for the configured variable.
      const adapter = new OpenAIChatAdapter({ baseURL: server.url, apiKeyEnv: 'DSH_TEST_UNSET_KEY', env: { OPENAI_API_KEY: 'sk-wrong-provider' } })
      const error = await failureOf(adapter.stream(requestOf()))
      expect(error).toBeInstanceOf(LlmError)
      expect(error.code).toBe('NO_API_KEY')
      expect(error.message).toMatch(/set the DSH_TEST_UNSET_KEY environment variable/)
      expect(server.requests).toHaveLength(0)
    } finally {
      await server.close()
    }
  })

  it('treats an empty variable as missing', async () => {
    const adapter = new OpenAIChatAdapter({ name: 'openai', apiKeyEnv: 'OPENAI_API_KEY', env: { OPENAI_API_KEY: '' } })
    const error = await failureOf(adapter.stream(requestOf()))
    expect(error.message).toMatch(/openai: no API key: set the OPENAI_API_KEY environment variable/)
  })
})
