import { LlmError } from '@dsh/llm'
import { describe, expect, it } from 'vitest'
import { collect, failureOf, fakeEndpoint, ofType, requestOf } from './helpers.js'

describe('streaming responses', () => {
  it('streams text as several text deltas, in order', async () => {
    const { adapter } = await fakeEndpoint([{ text: 'The quick brown fox' }])
    const chunks = await collect(adapter.stream(requestOf()))
    const deltas = ofType(chunks, 'text-delta').map((chunk) => chunk.text)
    expect(deltas.length).toBeGreaterThanOrEqual(3)
    expect(deltas.join('')).toBe('The quick brown fox')
    expect(chunks.at(-1)).toEqual({ type: 'finish', reason: 'stop' })
  })

  it('streams reasoning_content deltas as reasoning deltas before the text', async () => {
    const { adapter } = await fakeEndpoint([{ reasoning: ['Let me ', 'think.'], text: ['Four', '.'] }])
    const chunks = await collect(adapter.stream(requestOf()))
    expect(chunks.filter((chunk) => chunk.type === 'reasoning-delta' || chunk.type === 'text-delta')).toEqual([
      { type: 'reasoning-delta', text: 'Let me ' },
      { type: 'reasoning-delta', text: 'think.' },
      { type: 'text-delta', text: 'Four' },
      { type: 'text-delta', text: '.' },
    ])
  })

  it('assembles a streamed tool call into one tool-call chunk with parsed args', async () => {
    const { adapter } = await fakeEndpoint([{ text: 'Reading.', toolCalls: [{ id: 'call_abc', name: 'read_file', arguments: { path: 'src/index.ts', lines: [1, 20] } }] }])
    const chunks = await collect(adapter.stream(requestOf()))
    expect(ofType(chunks, 'tool-call')).toEqual([
      { type: 'tool-call', call: { type: 'tool-call', id: 'call_abc', name: 'read_file', args: { path: 'src/index.ts', lines: [1, 20] } } },
    ])
    expect(chunks.at(-1)).toEqual({ type: 'finish', reason: 'tool-calls' })
  })

  it('assembles parallel tool calls by index, in index order', async () => {
    const { adapter } = await fakeEndpoint([
      {
        toolCalls: [
          { id: 'call_1', name: 'read_file', arguments: { path: 'a.ts' } },
          { id: 'call_2', name: 'read_file', arguments: { path: 'b.ts' } },
          { id: 'call_3', name: 'list_dir', arguments: {} },
        ],
      },
    ])
    const calls = ofType(await collect(adapter.stream(requestOf())), 'tool-call').map((chunk) => chunk.call)
    expect(calls.map(({ id, name, args }) => ({ id, name, args }))).toEqual([
      { id: 'call_1', name: 'read_file', args: { path: 'a.ts' } },
      { id: 'call_2', name: 'read_file', args: { path: 'b.ts' } },
      { id: 'call_3', name: 'list_dir', args: {} },
    ])
  })

  it('keeps arguments that are not valid JSON as rawArgs with args undefined', async () => {
    const { adapter } = await fakeEndpoint([{ toolCalls: [{ id: 'call_x', name: 'bash', arguments: '{"command": "ls -la' }] }])
    const [chunk] = ofType(await collect(adapter.stream(requestOf())), 'tool-call')
    expect(chunk?.call).toEqual({ type: 'tool-call', id: 'call_x', name: 'bash', args: undefined, rawArgs: '{"command": "ls -la' })
  })

  it('reports usage, then the finish reason, as the last chunks', async () => {
    const { adapter } = await fakeEndpoint([{ text: 'ok then', usage: { promptTokens: 123, completionTokens: 7 } }])
    const chunks = await collect(adapter.stream(requestOf()))
    expect(chunks.slice(-2)).toEqual([
      { type: 'usage', usage: { inputTokens: 123, outputTokens: 7 } },
      { type: 'finish', reason: 'stop' },
    ])
  })

  it.each([
    ['stop', 'stop'],
    ['length', 'length'],
    ['content_filter', 'content-filter'],
    ['tool_calls', 'tool-calls'],
  ] as const)('maps finish_reason %s to %s', async (wire, reason) => {
    const { adapter } = await fakeEndpoint([{ text: 'some text', finishReason: wire }])
    expect((await collect(adapter.stream(requestOf()))).at(-1)).toEqual({ type: 'finish', reason })
  })

  it('fails with an LlmError on a finish reason that means the response is incomplete', async () => {
    const { adapter } = await fakeEndpoint([{ text: 'partial', finishReason: 'insufficient_system_resource' }])
    const error = await failureOf(adapter.stream(requestOf()))
    expect(error).toBeInstanceOf(LlmError)
    expect(error.message).toMatch(/insufficient_system_resource/)
  })
})
