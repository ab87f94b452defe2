import { afterEach, describe, expect, it } from 'vitest'
import { startFakeOpenAIChat, type FakeOpenAIChat } from '../src/index.js'

let server: FakeOpenAIChat | undefined
afterEach(async () => {
  await server?.close()
  server = undefined
})

async function start(...script: Parameters<typeof startFakeOpenAIChat>) {
  server = await startFakeOpenAIChat(...script)
  return server
}

function post(url: string, body: unknown, signal?: AbortSignal): Promise<Response> {
  return fetch(`${url}/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: 'Bearer sk-test' },
    body: JSON.stringify(body),
    signal,
  })
}

const streaming = { model: 'm', messages: [{ role: 'user', content: 'hi' }], stream: true }

interface Chunk {
  object: string
  choices: { delta: { content?: string | null; reasoning_content?: string; tool_calls?: { index: number; id?: string; function: { name?: string; arguments: string } }[] }; finish_reason: string | null }[]
  usage?: { prompt_tokens: number; completion_tokens: number; total_tokens: number } | null
}

/** The `data:` payloads of an SSE body, `[DONE]` kept as the literal string. */
async function sseEvents(response: Response): Promise<(Chunk | '[DONE]')[]> {
  const text = await response.text()
  return text
    .split('\n\n')
    .filter((frame) => frame.startsWith('data: '))
    .map((frame) => frame.slice('data: '.length))
    .map((data) => (data === '[DONE]' ? '[DONE]' : (JSON.parse(data) as Chunk)))
}

function chunksOf(events: (Chunk | '[DONE]')[]): Chunk[] {
  return events.filter((event): event is Chunk => event !== '[DONE]')
}

describe('fake OpenAI chat-completions server', () => {
  it('streams text as several chunk deltas and ends with [DONE]', async () => {
    const { url } = await start([{ text: 'Hello there, world' }])
    const response = await post(url, streaming)
    expect(response.status).toBe(200)
    expect(response.headers.get('content-type')).toMatch(/^text\/event-stream/)
    const events = await sseEvents(response)
    expect(events.at(-1)).toBe('[DONE]')
    const chunks = chunksOf(events)
    expect(chunks.every((chunk) => chunk.object === 'chat.completion.chunk')).toBe(true)
    const deltas = chunks.map((chunk) => chunk.choices[0]?.delta.content).filter((text): text is string => !!text)
    expect(deltas.length).toBeGreaterThanOrEqual(3)
    expect(deltas.join('')).toBe('Hello there, world')
    expect(chunks.at(-1)?.choices[0]?.finish_reason).toBe('stop')
  })

  it('streams exact deltas and DeepSeek-style reasoning_content when given', async () => {
    const { url } = await start([{ reasoning: ['thinking', ' hard'], text: ['a', 'b'] }])
    const chunks = chunksOf(await sseEvents(await post(url, streaming)))
    expect(chunks.map((chunk) => chunk.choices[0]?.delta.reasoning_content).filter(Boolean)).toEqual(['thinking', ' hard'])
    expect(chunks.map((chunk) => chunk.choices[0]?.delta.content).filter(Boolean)).toEqual(['a', 'b'])
  })

  it('streams a tool call as id and name first, then the arguments in several pieces', async () => {
    const { url } = await start([{ toolCalls: [{ id: 'call_1', name: 'read', arguments: { path: '/etc/hosts' } }, { name: 'ls', arguments: '{"dir":"."}' }] }])
    const chunks = chunksOf(await sseEvents(await post(url, streaming)))
    const fragments = chunks.flatMap((chunk) => chunk.choices[0]?.delta.tool_calls ?? [])
    const first = fragments.filter((fragment) => fragment.index === 0)
    expect(first[0]).toMatchObject({ id: 'call_1', function: { name: 'read', arguments: '' } })
    expect(first.length).toBeGreaterThanOrEqual(3)
    expect(first.map((fragment) => fragment.function.arguments).join('')).toBe('{"path":"/etc/hosts"}')
    const second = fragments.filter((fragment) => fragment.index === 1)
    expect(second[0]?.id).toMatch(/^call_/)
    expect(second.map((fragment) => fragment.function.arguments).join('')).toBe('{"dir":"."}')
    expect(chunks.at(-1)?.choices[0]?.finish_reason).toBe('tool_calls')
  })

  it('sends usage in a final choice-less chunk only when stream_options.include_usage is set', async () => {
    const { url } = await start([{ text: 'x y', usage: { promptTokens: 11, completionTokens: 2 } }, { text: 'x y' }])
    const withUsage = chunksOf(await sseEvents(await post(url, { ...streaming, stream_options: { include_usage: true } })))
    expect(withUsage.at(-1)).toMatchObject({ choices: [], usage: { prompt_tokens: 11, completion_tokens: 2, total_tokens: 13 } })
    const without = chunksOf(await sseEvents(await post(url, streaming)))
    expect(without.some((chunk) => chunk.usage)).toBe(false)
  })

  it('answers a non-streaming request with a chat.completion', async () => {
    const { url } = await start([{ text: 'done', toolCalls: [{ id: 'c', name: 't', arguments: {} }], finishReason: 'length' }])
    const response = await post(url, { model: 'gpt-x', messages: [] })
    expect(await response.json()).toMatchObject({
      object: 'chat.completion',
      model: 'gpt-x',
      choices: [{ message: { role: 'assistant', content: 'done', tool_calls: [{ id: 'c', type: 'function', function: { name: 't', arguments: '{}' } }] }, finish_reason: 'length' }],
      usage: { total_tokens: expect.any(Number) },
    })
  })

  it('records each request with its parsed body and headers', async () => {
    const { url, requests } = await start([{ text: 'ok' }])
    await (await post(url, { ...streaming, tools: [] })).text()
    expect(requests).toHaveLength(1)
    expect(requests[0]).toMatchObject({ method: 'POST', path: '/v1/chat/completions', body: { ...streaming, tools: [] } })
    expect(requests[0]?.headers.authorization).toBe('Bearer sk-test')
    expect(await requests[0]?.closed).toEqual({ completed: true })
  })

  it('answers a scripted HTTP error with an OpenAI-style error body', async () => {
    const { url } = await start([{ status: 429, error: { message: 'slow down', code: 'rate_limit_exceeded' } }, { error: 'boom' }])
    const limited = await post(url, streaming)
    expect(limited.status).toBe(429)
    expect(await limited.json()).toEqual({ error: { message: 'slow down', type: 'invalid_request_error', param: null, code: 'rate_limit_exceeded' } })
    const failed = await post(url, streaming)
    expect(failed.status).toBe(500)
    expect(await failed.json()).toMatchObject({ error: { message: 'boom', type: 'server_error' } })
  })

  it('answers 500 with a clear message when no scripted response is left', async () => {
    const { url, enqueue } = await start()
    const response = await post(url, streaming)
    expect(response.status).toBe(500)
    const body = (await response.json()) as { error: { message: string } }
    expect(body.error.message).toMatch(/no scripted response left for request #1/)
    enqueue({ text: 'now there is' })
    expect((await post(url, streaming)).status).toBe(200)
  })

  it('answers 404 for other routes', async () => {
    const { url } = await start([{ text: 'unused' }])
    const response = await fetch(`${url}/models`)
    expect(response.status).toBe(404)
    expect(server?.pending).toBe(1)
  })

  it('destroys the socket mid-stream when told to drop', async () => {
    const { url, requests } = await start([{ text: 'one two three four', dropAfterChunks: 2 }])
    const response = await post(url, streaming)
    await expect(response.text()).rejects.toThrow()
    expect(await requests[0]?.closed).toEqual({ completed: false })
  })

  it('holds a stream open until the client aborts, and sees the connection close', async () => {
    const { url, requests } = await start([{ text: 'one two three', hangAfterChunks: 2 }])
    const controller = new AbortController()
    const response = await post(url, streaming, controller.signal)
    const reader = response.body!.getReader()
    await reader.read()
    controller.abort()
    await expect(reader.read()).rejects.toThrow()
    expect(await requests[0]?.closed).toEqual({ completed: false })
  })

  it('close() ends held-open streams instead of waiting for them', async () => {
    const { url } = await start([{ text: 'never finished', hangAfterChunks: 1 }])
    const response = await post(url, streaming)
    const body = response.text()
    // close() must not wait for them: a held stream never ends, so waiting would run into the test's timeout.
    await server!.close()
    await expect(body).rejects.toThrow()
  })

  it('waits delayMs before answering', async () => {
    const { url } = await start([{ text: 'late', delayMs: 150 }])
    const started = Date.now()
    await (await post(url, streaming)).text()
    expect(Date.now() - started).toBeGreaterThanOrEqual(140)
  })
})
