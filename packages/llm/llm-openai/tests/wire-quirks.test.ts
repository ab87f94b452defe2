import { LlmError } from '@dsh/llm'
import { startLoopbackServer, type LoopbackServer } from '@dsh/testkit'
import { afterEach, describe, expect, it } from 'vitest'
import { OpenAIChatAdapter } from '../src/index.js'
import { collect, failureOf, requestOf } from './helpers.js'

let server: LoopbackServer | undefined
afterEach(async () => {
  await server?.close()
  server = undefined
})

/** An endpoint that answers every request with exactly these SSE `data:` payloads. */
async function endpointSending(events: unknown[]): Promise<OpenAIChatAdapter> {
  server = await startLoopbackServer(async (_req, res) => {
    res.writeHead(200, { 'content-type': 'text/event-stream' })
    for (const event of events) res.write(`data: ${typeof event === 'string' ? event : JSON.stringify(event)}\n\n`)
    res.end()
  })
  return new OpenAIChatAdapter({ name: 'quirky', baseURL: `${server.origin}/v1`, apiKey: 'sk-test' })
}

const chunk = (delta: Record<string, unknown>, finish_reason: string | null = null) => ({
  id: 'c',
  object: 'chat.completion.chunk',
  created: 0,
  model: 'm',
  choices: [{ index: 0, delta, finish_reason }],
})

describe('wire quirks of compatible servers', () => {
  it('fails with an LlmError when the stream ends cleanly but the model never finished', async () => {
    const adapter = await endpointSending([chunk({ content: 'half an ans' }), '[DONE]'])
    const error = await failureOf(adapter.stream(requestOf()))
    expect(error).toBeInstanceOf(LlmError)
    expect(error.code).toBe('INCOMPLETE_RESPONSE')
    expect(error.message).toMatch(/ended before the model finished/)
  })

  it('turns an error event inside the stream into an LlmError with its message', async () => {
    const adapter = await endpointSending([chunk({ content: 'Hi' }), { error: { message: 'upstream model crashed', type: 'server_error' } }])
    const error = await failureOf(adapter.stream(requestOf()))
    expect(error).toBeInstanceOf(LlmError)
    expect(error.code).toBe('BAD_RESPONSE')
    expect(error.message).toContain('upstream model crashed')
  })

  it('turns a chunk that is not JSON into an LlmError', async () => {
    const adapter = await endpointSending([chunk({ content: 'Hi' }), '{not json'])
    const error = await failureOf(adapter.stream(requestOf()))
    expect(error).toBeInstanceOf(LlmError)
    expect(error.code).toBe('BAD_RESPONSE')
    expect(error.message).toMatch(/malformed response stream/)
  })

  it('tolerates fragments that repeat the id and name and omit the index', async () => {
    const fragment = (args: string) => ({ tool_calls: [{ id: 'call_7', type: 'function', function: { name: 'grep', arguments: args } }] })
    const adapter = await endpointSending([chunk(fragment('{"pattern":')), chunk(fragment('"TODO"}')), chunk({}, 'tool_calls'), '[DONE]'])
    const chunks = await collect(adapter.stream(requestOf()))
    expect(chunks).toEqual([
      { type: 'tool-call', call: { type: 'tool-call', id: 'call_7', name: 'grep', args: { pattern: 'TODO' } } },
      { type: 'finish', reason: 'tool-calls' },
    ])
  })

  it('reads `reasoning` deltas (vLLM, OpenRouter) like `reasoning_content`', async () => {
    const adapter = await endpointSending([chunk({ reasoning: 'hmm' }), chunk({ content: 'ok' }, 'stop'), '[DONE]'])
    expect((await collect(adapter.stream(requestOf()))).slice(0, 2)).toEqual([
      { type: 'reasoning-delta', text: 'hmm' },
      { type: 'text-delta', text: 'ok' },
    ])
  })
})
