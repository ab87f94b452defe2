import { afterEach, describe, expect, it } from 'vitest'
import { startFakeOpenAIResponses, type FakeOpenAIResponses } from '../src/index.js'

let server: FakeOpenAIResponses | undefined
afterEach(async () => {
  await server?.close()
  server = undefined
})

async function start(...script: Parameters<typeof startFakeOpenAIResponses>) {
  server = await startFakeOpenAIResponses(...script)
  return server
}

function post(url: string, body: unknown, signal?: AbortSignal): Promise<Response> {
  return fetch(`${url}/responses`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: 'Bearer sk-test' },
    body: JSON.stringify(body),
    signal,
  })
}

const streaming = { model: 'gpt-5.5', input: [{ type: 'message', role: 'user', content: [{ type: 'input_text', text: 'hi' }] }], stream: true }

interface StreamEvent {
  type: string
  sequence_number: number
  delta?: string
  item?: { type: string; id: string; call_id?: string; name?: string; arguments?: string; content?: { text: string }[] }
  response?: { status: string; output: unknown[]; usage: { input_tokens: number; output_tokens: number; total_tokens: number } | null; error?: { message: string } }
}

/** The SSE frames of a body: the `event:` name and the parsed `data:`; they must agree. */
async function sseEvents(response: Response): Promise<StreamEvent[]> {
  const text = await response.text()
  return text
    .split('\n\n')
    .filter(Boolean)
    .map((frame) => {
      const [eventLine, dataLine] = frame.split('\n')
      const event = JSON.parse(dataLine.slice('data: '.length)) as StreamEvent
      expect(eventLine).toBe(`event: ${event.type}`)
      return event
    })
}

const types = (events: StreamEvent[]) => events.map((event) => event.type)

describe('fake OpenAI Responses server', () => {
  it('streams text as output_item.added, several output_text deltas, output_item.done, response.completed', async () => {
    const { url } = await start([{ text: 'Hello there, world' }])
    const response = await post(url, streaming)
    expect(response.status).toBe(200)
    expect(response.headers.get('content-type')).toMatch(/^text\/event-stream/)
    const events = await sseEvents(response)
    expect(types(events)).toEqual([
      'response.created',
      'response.output_item.added',
      'response.content_part.added',
      'response.output_text.delta',
      'response.output_text.delta',
      'response.output_text.delta',
      'response.output_text.done',
      'response.content_part.done',
      'response.output_item.done',
      'response.completed',
    ])
    expect(events.map((event) => event.sequence_number)).toEqual([...events.keys()])
    expect(events.filter((event) => event.type === 'response.output_text.delta').map((event) => event.delta).join('')).toBe('Hello there, world')
    const done = events.find((event) => event.type === 'response.output_item.done')!
    expect(done.item).toMatchObject({ type: 'message', role: 'assistant', status: 'completed', content: [{ type: 'output_text', text: 'Hello there, world' }] })
    expect(events.at(-1)!.response).toMatchObject({ status: 'completed', output: [done.item], usage: { total_tokens: expect.any(Number) } })
  })

  it('streams a function call as an output item with call_id, name and arguments', async () => {
    const { url } = await start([{ text: 'Let me look.', toolCalls: [{ callId: 'call_a', name: 'exec_command', arguments: { cmd: 'ls' } }, { name: 'view', arguments: '{"p":1}' }] }])
    const events = await sseEvents(await post(url, streaming))
    const items = events.filter((event) => event.type === 'response.output_item.done').map((event) => event.item)
    expect(items).toMatchObject([
      { type: 'message' },
      { type: 'function_call', call_id: 'call_a', name: 'exec_command', arguments: '{"cmd":"ls"}', status: 'completed' },
      { type: 'function_call', call_id: 'call_1_1', name: 'view', arguments: '{"p":1}' },
    ])
    expect(types(events)).toContain('response.function_call_arguments.delta')
    expect(types(events).at(-1)).toBe('response.completed')
  })

  it('answers a non-streaming request with the finished response object', async () => {
    const { url } = await start([{ text: 'done', toolCalls: [{ callId: 'c', name: 't', arguments: {} }], usage: { inputTokens: 10, outputTokens: 2 } }])
    const response = await post(url, { model: 'gpt-x', input: 'hi' })
    expect(await response.json()).toMatchObject({
      object: 'response',
      status: 'completed',
      model: 'gpt-x',
      output: [
        { type: 'message', content: [{ type: 'output_text', text: 'done' }] },
        { type: 'function_call', call_id: 'c', name: 't', arguments: '{}' },
      ],
      usage: { input_tokens: 10, output_tokens: 2, total_tokens: 12 },
    })
  })

  it('records each request with its parsed body and headers', async () => {
    const { url, requests } = await start([{ text: 'ok' }])
    await (await post(url, streaming)).text()
    expect(requests).toHaveLength(1)
    expect(requests[0]).toMatchObject({ method: 'POST', path: '/v1/responses', body: streaming })
    expect(requests[0].headers.authorization).toBe('Bearer sk-test')
    expect(await requests[0].closed).toEqual({ completed: true })
  })

  it('omitCompleted ends the stream cleanly without response.completed', async () => {
    const { url } = await start([{ text: 'half', omitCompleted: true }])
    const events = await sseEvents(await post(url, streaming))
    expect(types(events)).not.toContain('response.completed')
    expect(types(events).at(-1)).toBe('response.output_item.done')
  })

  it('failed streams response.failed with the error in place of response.completed', async () => {
    const { url } = await start([{ failed: { message: 'model melted', code: 'server_error' } }])
    const events = await sseEvents(await post(url, streaming))
    expect(types(events)).toEqual(['response.created', 'response.failed'])
    expect(events[1].response).toMatchObject({ status: 'failed', error: { message: 'model melted' } })
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

  it('answers 500 with a clear message when no scripted answer is left, 404 for other routes', async () => {
    const { url, enqueue } = await start()
    const empty = await post(url, streaming)
    expect(empty.status).toBe(500)
    expect(((await empty.json()) as { error: { message: string } }).error.message).toMatch(/no scripted answer left for request #1/)
    expect((await fetch(`${url}/models`)).status).toBe(404)
    enqueue({ text: 'now there is' })
    expect(server?.pending).toBe(1)
    expect((await post(url, streaming)).status).toBe(200)
  })

  it('destroys the socket mid-stream when told to drop', async () => {
    const { url, requests } = await start([{ text: 'one two three four', dropAfterEvents: 3 }])
    const response = await post(url, streaming)
    await expect(response.text()).rejects.toThrow()
    expect(await requests[0].closed).toEqual({ completed: false })
  })

  it('holds a stream open until the client aborts', async () => {
    const { url, requests } = await start([{ text: 'one two three', hangAfterEvents: 2 }])
    const controller = new AbortController()
    const response = await post(url, streaming, controller.signal)
    const reader = response.body!.getReader()
    await reader.read()
    controller.abort()
    await expect(reader.read()).rejects.toThrow()
    expect(await requests[0].closed).toEqual({ completed: false })
  })

  it('close() ends held-open and delayed requests instead of waiting for them', async () => {
    const { url, requests } = await start([{ text: 'never', hangAfterEvents: 1 }, { text: 'late', delayMs: 60_000 }])
    const held = (await post(url, streaming)).text().then(() => 'finished', () => 'cut')
    const delayed = post(url, streaming).then(() => 'answered', () => 'cut')
    while (requests.length < 2) await new Promise((resolve) => setTimeout(resolve, 5))
    // close() must not wait for them: a held stream never ends and the delayed answer (60 s) outlasts the test's timeout.
    await server!.close()
    expect(await held).toBe('cut')
    expect(await delayed).toBe('cut')
  })

  it('waits delayMs before answering and eventDelayMs between events', async () => {
    const { url } = await start([{ text: 'a b', delayMs: 100, eventDelayMs: 20 }])
    const started = Date.now()
    await (await post(url, streaming)).text()
    // 100 ms up front, then 20 ms before each of the 9 events after the first (timers may fire a little early).
    expect(Date.now() - started).toBeGreaterThanOrEqual(250)
  })
})
