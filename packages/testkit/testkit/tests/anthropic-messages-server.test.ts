import Anthropic from '@anthropic-ai/sdk'
import { afterEach, describe, expect, it } from 'vitest'
import { startFakeAnthropicMessages, type FakeAnthropicMessages, type FakeMessagesAnswer } from '../src/index.js'

let server: FakeAnthropicMessages | undefined
afterEach(async () => {
  await server?.close()
  server = undefined
})

async function start(script: FakeMessagesAnswer[] = []) {
  server = await startFakeAnthropicMessages(script)
  return server
}

function post(url: string, path: string, body: unknown, signal?: AbortSignal): Promise<Response> {
  return fetch(`${url}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-api-key': 'sk-ant-test', 'anthropic-version': '2023-06-01' },
    body: JSON.stringify(body),
    signal,
  })
}

const streaming = { model: 'claude-test', max_tokens: 100, messages: [{ role: 'user', content: 'hi' }], stream: true }

interface Frame {
  event: string
  data: { type: string; index?: number; delta?: Record<string, unknown>; content_block?: Record<string, unknown>; message?: Record<string, unknown>; usage?: Record<string, unknown> }
}

/** The `event:`/`data:` frames of an SSE body. */
async function frames(response: Response): Promise<Frame[]> {
  const text = await response.text()
  return text
    .split('\n\n')
    .filter(Boolean)
    .map((frame) => {
      const [eventLine, dataLine] = frame.split('\n')
      return { event: eventLine!.slice('event: '.length), data: JSON.parse(dataLine!.slice('data: '.length)) as Frame['data'] }
    })
}

const client = (url: string) => new Anthropic({ baseURL: url, apiKey: 'sk-ant-test', maxRetries: 0 })

describe('fake Anthropic Messages server', () => {
  it('streams the full event sequence, with the type repeated in every data payload', async () => {
    const { url } = await start([{ text: 'Hello there, world' }])
    const response = await post(url, '/v1/messages?beta=true', streaming)
    expect(response.status).toBe(200)
    expect(response.headers.get('content-type')).toMatch(/^text\/event-stream/)
    const all = await frames(response)
    expect(all.every((frame) => frame.event === frame.data.type)).toBe(true)
    const types = all.map((frame) => frame.event)
    expect(types[0]).toBe('message_start')
    expect(types.slice(-4)).toEqual(['content_block_delta', 'content_block_stop', 'message_delta', 'message_stop'])
    expect(types.filter((type) => type === 'content_block_delta').length).toBeGreaterThanOrEqual(3)
    const text = all.filter((frame) => frame.event === 'content_block_delta').map((frame) => frame.data.delta!.text).join('')
    expect(text).toBe('Hello there, world')
    expect(all.find((frame) => frame.event === 'message_delta')!.data).toMatchObject({ delta: { stop_reason: 'end_turn' }, usage: { output_tokens: expect.any(Number) } })
  })

  it('is read correctly by the official SDK: text and a tool_use block with its input', async () => {
    const { url } = await start([{ text: 'Let me look.', toolUses: [{ id: 'toolu_1', name: 'Bash', input: { command: 'ls -la' } }] }])
    const stream = client(url).messages.stream({ model: 'claude-test', max_tokens: 100, messages: [{ role: 'user', content: 'list' }] })
    const message = await stream.finalMessage()
    expect(message.content).toMatchObject([
      { type: 'text', text: 'Let me look.' },
      { type: 'tool_use', id: 'toolu_1', name: 'Bash', input: { command: 'ls -la' } },
    ])
    expect(message.stop_reason).toBe('tool_use')
  })

  it('streams tool input as several input_json_delta pieces', async () => {
    const { url } = await start([{ toolUses: [{ name: 'Write', input: { file_path: '/tmp/x', content: 'hello' } }] }])
    const all = await frames(await post(url, '/v1/messages', streaming))
    const start_ = all.find((frame) => frame.event === 'content_block_start')!
    expect(start_.data.content_block).toMatchObject({ type: 'tool_use', id: 'toolu_fake_1_0', name: 'Write', input: {} })
    const pieces = all.filter((frame) => frame.event === 'content_block_delta').map((frame) => frame.data.delta!)
    expect(pieces.length).toBeGreaterThanOrEqual(2)
    expect(pieces.every((piece) => piece.type === 'input_json_delta')).toBe(true)
    expect(JSON.parse(pieces.map((piece) => piece.partial_json).join(''))).toEqual({ file_path: '/tmp/x', content: 'hello' })
  })

  it('answers a non-streaming request with a message body (the client fallback)', async () => {
    const { url } = await start([{ text: 'done', usage: { inputTokens: 12, outputTokens: 3 } }])
    const message = await client(url).messages.create({ model: 'claude-test', max_tokens: 10, messages: [{ role: 'user', content: 'x' }] })
    expect(message).toMatchObject({ type: 'message', role: 'assistant', model: 'claude-test', content: [{ type: 'text', text: 'done' }], stop_reason: 'end_turn', usage: { input_tokens: 12, output_tokens: 3 } })
  })

  it('answers a scripted HTTP error with an Anthropic error body the SDK understands', async () => {
    const { url } = await start([{ status: 529, error: 'overloaded right now' }, { error: { type: 'api_error', message: 'boom' } }])
    const overloaded = await post(url, '/v1/messages', streaming)
    expect(overloaded.status).toBe(529)
    expect(await overloaded.json()).toEqual({ type: 'error', error: { type: 'overloaded_error', message: 'overloaded right now' } })
    const failure = await client(url).messages.create({ model: 'm', max_tokens: 1, messages: [{ role: 'user', content: 'x' }] }).catch((error: unknown) => error)
    expect(failure).toBeInstanceOf(Anthropic.InternalServerError)
    expect((failure as Error).message).toContain('boom')
  })

  it('records every request, answers count_tokens without consuming the script, and 404s other routes', async () => {
    const fake = await start([{ text: 'ok' }])
    const counted = await post(fake.url, '/v1/messages/count_tokens?beta=true', { model: 'm', messages: [{ role: 'user', content: 'count me please' }] })
    expect(await counted.json()).toEqual({ input_tokens: expect.any(Number) })
    expect((await fetch(`${fake.url}/v1/models`)).status).toBe(404)
    expect(fake.pending).toBe(1)
    await (await post(fake.url, '/v1/messages?beta=true', streaming)).text()
    expect(fake.requests.map((request) => request.kind)).toEqual(['count_tokens', 'other', 'messages'])
    expect(fake.messageRequests).toHaveLength(1)
    expect(fake.messageRequests[0]).toMatchObject({ method: 'POST', path: '/v1/messages?beta=true', body: streaming })
    expect(fake.messageRequests[0]!.headers['x-api-key']).toBe('sk-ant-test')
    expect(await fake.messageRequests[0]!.closed).toEqual({ completed: true })
  })

  it('answers 500 with a clear message when no scripted answer is left', async () => {
    const fake = await start()
    const response = await post(fake.url, '/v1/messages', streaming)
    expect(response.status).toBe(500)
    const body = (await response.json()) as { error: { message: string } }
    expect(body.error.message).toMatch(/no scripted response left for messages request #1/)
  })

  it('builds an answer from the request when given a function', async () => {
    const { url } = await start([(request) => ({ text: `you said ${JSON.stringify((request.body as { messages: { content: string }[] }).messages[0]!.content)}` })])
    const message = await client(url).messages.create({ model: 'm', max_tokens: 10, messages: [{ role: 'user', content: 'ping' }] })
    expect(message.content[0]).toMatchObject({ text: 'you said "ping"' })
  })

  it('leaves out the events named in omitEvents', async () => {
    const { url } = await start([{ text: 'a b', omitEvents: ['content_block_stop', 'ping'] }])
    const types = (await frames(await post(url, '/v1/messages', streaming))).map((frame) => frame.event)
    expect(types).not.toContain('content_block_stop')
    expect(types).not.toContain('ping')
    expect(types.at(-1)).toBe('message_stop')
  })

  it('destroys the socket mid-stream when told to drop', async () => {
    const fake = await start([{ text: 'one two three four', dropAfterEvents: 3 }])
    const response = await post(fake.url, '/v1/messages', streaming)
    await expect(response.text()).rejects.toThrow()
    expect(await fake.messageRequests[0]!.closed).toEqual({ completed: false })
  })

  it('holds a stream open until the client hangs up, and messageRequest(n) resolves once it arrived', async () => {
    const fake = await start([{ text: 'one two three', hangAfterEvents: 2 }])
    const arrived = fake.messageRequest(1)
    const controller = new AbortController()
    const response = await post(fake.url, '/v1/messages', streaming, controller.signal)
    expect((await arrived).kind).toBe('messages')
    const reader = response.body!.getReader()
    await reader.read()
    controller.abort()
    await expect(reader.read()).rejects.toThrow()
    expect(await fake.messageRequests[0]!.closed).toEqual({ completed: false })
  })

  it('close() ends held-open streams instead of waiting for them', async () => {
    const { url } = await start([{ text: 'never finished', hangAfterEvents: 1 }])
    const body = (await post(url, '/v1/messages', streaming)).text()
    // close() must not wait for them: a held stream never ends, so waiting would run into the test's timeout.
    await server!.close()
    await expect(body).rejects.toThrow()
  })

  it('waits delayMs before answering', async () => {
    const { url } = await start([{ text: 'late', delayMs: 150 }])
    const started = Date.now()
    await (await post(url, '/v1/messages', streaming)).text()
    expect(Date.now() - started).toBeGreaterThanOrEqual(140)
  })
})
