import { LlmError } from '@dsh/llm'
import { describe, expect, it } from 'vitest'
import { AnthropicAdapter } from '../src/index.js'
import { collect, failureOf, fakeEndpoint, fakeServer, requestOf } from './helpers.js'

describe('provider errors and retries', () => {
  it('honours a 429 retry-after: waits what the server asked, then retries and streams', async () => {
    // The backoff would be over a minute, past the test's timeout: only the server's one second lets this pass.
    const { server, adapter } = await fakeEndpoint([{ status: 429, error: 'slow down', errorHeaders: { 'retry-after': '1' } }, { text: 'after the wait' }], { maxRetries: 2, retryBaseDelayMs: 100_000, retryMaxDelayMs: 100_000, retryBudgetMs: 200_000 })
    const started = Date.now()
    const chunks = await collect(adapter.stream(requestOf()))
    expect(chunks.at(-1)).toEqual({ type: 'finish', reason: 'stop' })
    expect(server.messageRequests).toHaveLength(2)
    // And not sooner than the server asked.
    expect(Date.now() - started).toBeGreaterThanOrEqual(1000)
  })

  it('gives up at once, in one line, when retry-after asks for more than the retry budget', async () => {
    const { server, adapter } = await fakeEndpoint([{ status: 429, error: 'slow down', errorHeaders: { 'retry-after': '3600' } }], { maxRetries: 3, retryBudgetMs: 60_000 })
    const error = await failureOf(adapter.stream(requestOf()))
    expect(error).toMatchObject({ code: 'RATE_LIMITED', status: 429 })
    expect(error.message).toContain('the server asked to wait 3600000 ms, which is more than the 60000 ms left of retryBudgetMs')
    expect(server.messageRequests).toHaveLength(1)
  })

  it('retries 529 overloaded_error within maxRetries, then says it gave up, naming the type', async () => {
    const overloaded = { status: 529, error: { type: 'overloaded_error', message: 'Overloaded' } }
    const { server, adapter } = await fakeEndpoint([overloaded, overloaded, overloaded], { maxRetries: 2, retryBaseDelayMs: 1 })
    const error = await failureOf(adapter.stream(requestOf()))
    expect(error).toBeInstanceOf(LlmError)
    expect(error).toMatchObject({ code: 'HTTP_SERVER', status: 529 })
    expect(error.message).toBe(`fake: HTTP 529 (overloaded_error) from ${server.url}: Overloaded (gave up after 2 retries)`)
    expect(server.messageRequests).toHaveLength(3)
  })

  it('turns an overloaded_error event inside the stream into a retryable server error', async () => {
    const frames = ['event: error\ndata: {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}\n\n']
    const { server, adapter } = await fakeEndpoint([{ rawFrames: frames }, { text: 'second time' }], { maxRetries: 1, retryBaseDelayMs: 1 })
    const chunks = await collect(adapter.stream(requestOf()))
    expect(chunks.at(-1)).toEqual({ type: 'finish', reason: 'stop' })
    expect(server.messageRequests).toHaveLength(2)
  })

  it('ends a stream cut in the middle of an event with a clear LlmError, not a hang', async () => {
    const { adapter } = await fakeEndpoint([{ text: 'one two three four', cutMidEventAfter: 4 }])
    const error = await failureOf(adapter.stream(requestOf()))
    expect(error).toBeInstanceOf(LlmError)
    expect(['CONNECTION_LOST', 'INCOMPLETE_RESPONSE']).toContain(error.code)
    expect(error.message).toMatch(/^fake: .*(broke off|ended before the model finished)/)
  })

  it('ends a stream that closes cleanly without message_stop as an incomplete response', async () => {
    const { adapter } = await fakeEndpoint([{ text: 'one two', omitEvents: ['message_delta', 'message_stop'] }])
    const error = await failureOf(adapter.stream(requestOf()))
    expect(error.code).toBe('INCOMPLETE_RESPONSE')
    expect(error.message).toContain('ended before the model finished (no stop_reason)')
  })

  it('turns garbage in the stream into BAD_RESPONSE naming the server', async () => {
    const { server, adapter } = await fakeEndpoint([{ rawFrames: ['event: message_start\ndata: {this is not json\n\n'] }])
    const error = await failureOf(adapter.stream(requestOf()))
    expect(error).toBeInstanceOf(LlmError)
    expect(error.code).toBe('BAD_RESPONSE')
    expect(error.message).toContain(`malformed event in the response stream from ${server.url}`)
  })

  it('gives up on a stream that goes quiet for timeoutMs', async () => {
    const { adapter } = await fakeEndpoint([{ text: 'one two three', hangAfterEvents: 3 }], { timeoutMs: 200 })
    const error = await failureOf(adapter.stream(requestOf()))
    expect(error.code).toBe('STALLED')
    expect(error.message).toMatch(/no data .* for 200 ms/)
  })

  it('ends with an AbortError when aborted mid-stream, and closes the connection', async () => {
    const { server, adapter } = await fakeEndpoint([{ text: 'one two three four five', hangAfterEvents: 4 }])
    const controller = new AbortController()
    const error = await failureOf(
      (async function* () {
        for await (const chunk of adapter.stream(requestOf({ signal: controller.signal }))) {
          controller.abort()
          yield chunk
        }
      })(),
    )
    expect(error.name).toBe('AbortError')
    expect(await server.messageRequests[0]!.closed).toEqual({ completed: false })
  })

  it.each([
    [400, 'HTTP_CLIENT'],
    [401, 'AUTH'],
    [500, 'HTTP_SERVER'],
  ])('codes HTTP %i as %s with the server message, without retrying by default', async (status, code) => {
    const { server, adapter } = await fakeEndpoint([{ status, error: 'nope' }])
    const error = await failureOf(adapter.stream(requestOf()))
    expect(error).toMatchObject({ name: 'AnthropicError', code, status })
    expect(error.message).toContain('nope')
    expect(server.messageRequests).toHaveLength(1)
  })

  it('says which server it could not reach', async () => {
    const gone = await fakeServer()
    await gone.close()
    const adapter = new AnthropicAdapter({ baseURL: gone.url, apiKey: 'sk-ant-test', maxRetries: 0 })
    const error = await failureOf(adapter.stream(requestOf()))
    expect(error.code).toBe('UNREACHABLE')
    expect(error.message).toContain(`cannot reach ${gone.url}`)
  })
})
