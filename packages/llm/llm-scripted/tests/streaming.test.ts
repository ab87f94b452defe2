import { describe, expect, it } from 'vitest'
import type { LlmChunk, Message, ToolCallBlock } from '@dsh/llm'
import { splitText } from '../src/index.js'
import { scriptedContext, textOfChunks } from './harness.js'

const calls = (chunks: LlmChunk[]): ToolCallBlock[] =>
  chunks.flatMap((chunk) => (chunk.type === 'tool-call' ? [chunk.call] : []))
const finish = (chunks: LlmChunk[]) => chunks.find((chunk) => chunk.type === 'finish')

describe('streamed replies', () => {
  it('streams text in several text-delta chunks, then usage, then finish "stop"', async () => {
    const text = 'The quick brown fox jumps over the lazy dog near the river bank.'
    const { ask } = await scriptedContext({ scripts: { demo: [{ reply: [{ text }] }] } })
    const chunks = await ask('scripted:demo')
    const deltas = chunks.filter((chunk) => chunk.type === 'text-delta')
    expect(deltas.length).toBeGreaterThanOrEqual(2)
    expect(textOfChunks(chunks)).toBe(text)
    expect(chunks.slice(-2).map((chunk) => chunk.type)).toEqual(['usage', 'finish'])
    expect(finish(chunks)).toEqual({ type: 'finish', reason: 'stop' })
    const usage = chunks.find((chunk) => chunk.type === 'usage')
    expect(usage).toMatchObject({ usage: { outputTokens: Math.ceil(text.length / 4) } })
    expect(usage?.type === 'usage' && usage.usage.inputTokens).toBeGreaterThan(0)
  })

  it('splits even two short words into two chunks, and long text into only a few', () => {
    expect(splitText('hi there')).toEqual(['hi ', 'there'])
    expect(splitText('single')).toEqual(['single'])
    expect(splitText('')).toEqual([])
    const long = 'word '.repeat(400).trim()
    const pieces = splitText(long)
    expect(pieces.join('')).toBe(long)
    expect(pieces.length).toBeLessThanOrEqual(10)
  })

  it('emits one tool call as a whole tool-call chunk with finish "tool-calls"', async () => {
    const { ask } = await scriptedContext({
      scripts: { demo: [{ reply: [{ call: { tool: 'read_file', args: { path: 'a.txt' } } }, { call: { tool: 'ls' } }] }] },
    })
    const first = await ask('scripted:demo')
    expect(first.filter((chunk) => chunk.type === 'text-delta')).toEqual([])
    expect(calls(first)).toEqual([{ type: 'tool-call', id: expect.stringMatching(/^call_\d+$/), name: 'read_file', args: { path: 'a.txt' } }])
    expect(finish(first)).toEqual({ type: 'finish', reason: 'tool-calls' })
    const second = await ask('scripted:demo')
    expect(calls(second)[0].args).toEqual({})
    expect(calls(second)[0].id).not.toBe(calls(first)[0].id)
  })

  it('emits parallel calls in one response, after any text, each with a unique id', async () => {
    const { ask } = await scriptedContext({
      scripts: {
        demo: [{
          reply: [{
            text: 'Reading both files now.',
            calls: [{ tool: 'read_file', args: { path: 'a' } }, { tool: 'read_file', args: { path: 'b' } }],
          }],
        }],
      },
    })
    const chunks = await ask('scripted:demo')
    const kinds = chunks.map((chunk) => chunk.type)
    expect(kinds.lastIndexOf('text-delta')).toBeLessThan(kinds.indexOf('tool-call'))
    expect(textOfChunks(chunks)).toBe('Reading both files now.')
    const made = calls(chunks)
    expect(made.map((call) => call.args)).toEqual([{ path: 'a' }, { path: 'b' }])
    expect(new Set(made.map((call) => call.id)).size).toBe(2)
    expect(finish(chunks)).toEqual({ type: 'finish', reason: 'tool-calls' })
  })

  it('hands out fresh argument objects, so a consumer mutating them cannot change the script', async () => {
    const { ask } = await scriptedContext({ scripts: { demo: [{ reply: [{ call: { tool: 't', args: { n: 1 } } }] }] } })
    const first = calls(await ask('scripted:demo', { sessionId: 'a' }))[0]
    ;(first.args as { n: number }).n = 99
    expect(calls(await ask('scripted:demo', { sessionId: 'b' }))[0].args).toEqual({ n: 1 })
  })

  it('copies nested arguments deeply on every request, values that are not JSON included', async () => {
    const when = new Date(0)
    const args = { nested: { list: [1, { x: 2 }] }, when }
    const { ask } = await scriptedContext({ scripts: { demo: [{ reply: [{ call: { tool: 't', args } }] }] } })
    const first = calls(await ask('scripted:demo', { sessionId: 'a' }))[0].args as typeof args
    first.nested.list.push(3)
    ;(first.nested.list[1] as { x: number }).x = 99
    first.when.setTime(5)
    const second = calls(await ask('scripted:demo', { sessionId: 'b' }))[0].args as typeof args
    expect(second).toEqual({ nested: { list: [1, { x: 2 }] }, when: new Date(0) })
    expect(second.when).not.toBe(when)
    expect(when.getTime()).toBe(0)
  })

  it('streams the same chunks each time a reply is played, its output tokens counting its text and calls', async () => {
    const text = 'Delegating the two parts of the task now.'
    const callArgs = { description: 'd', prompt: 'child task' }
    const { ask } = await scriptedContext({ scripts: { demo: [{ reply: [{ text, calls: [{ tool: 'subagent', args: callArgs }] }] }] } })
    const plays = [await ask('scripted:demo', { sessionId: 'a' }), await ask('scripted:demo', { sessionId: 'b' })]
    const withoutIds = (chunks: LlmChunk[]) => chunks.map((chunk) => (chunk.type === 'tool-call' ? { ...chunk, call: { ...chunk.call, id: 'id' } } : chunk))
    expect(withoutIds(plays[1])).toEqual(withoutIds(plays[0]))
    expect(plays[0].filter((chunk) => chunk.type === 'text-delta').map((chunk) => chunk.type === 'text-delta' && chunk.text)).toEqual(splitText(text))
    expect(plays[0].map((chunk) => chunk.type).slice(-3)).toEqual(['tool-call', 'usage', 'finish'])
    const outputTokens = Math.ceil((text.length + 'subagent'.length + JSON.stringify(callArgs).length) / 4)
    for (const chunks of plays) expect(chunks.find((chunk) => chunk.type === 'usage')).toMatchObject({ usage: { outputTokens } })
  })

  it('replaces {{last_tool_result}} with the text of the latest tool message', async () => {
    const { ask } = await scriptedContext({ scripts: { demo: [{ reply: [{ text: 'The file says: {{last_tool_result}}.' }] }] } })
    const result = (callId: string, text: string): Message => ({
      role: 'tool',
      content: [{ type: 'tool-result', callId, name: 'read_file', content: [{ type: 'text', text }] }],
    })
    const messages: Message[] = [
      { role: 'user', content: [{ type: 'text', text: 'read it' }] },
      result('call_1', 'old contents'),
      { role: 'assistant', content: [{ type: 'tool-call', id: 'call_2', name: 'read_file', args: {} }] },
      {
        role: 'tool',
        content: [{ type: 'tool-result', callId: 'call_2', name: 'read_file', content: [{ type: 'text', text: 'hello ' }, { type: 'text', text: 'world' }] }],
      },
    ]
    expect(textOfChunks(await ask('scripted:demo', { messages }))).toBe('The file says: hello world.')
  })

  it('replaces {{last_tool_result}} with an empty string when no tool has run', async () => {
    const { ask } = await scriptedContext({ scripts: { demo: [{ reply: [{ text: 'Result: [{{last_tool_result}}]' }] }] } })
    expect(textOfChunks(await ask('scripted:demo'))).toBe('Result: []')
  })
})

describe('{{tool_results}}', () => {
  it('joins every tool result of the latest step in model order', async () => {
    const { ScriptedAdapter } = await import('../src/index.js')
    const { historyOf, userText } = await import('@dsh/llm')
    const adapter = new ScriptedAdapter({ scripts: { s: [{ reply: [{ text: 'got: {{tool_results}} / last: {{last_tool_result}}' }] }] } })
    const result = (callId: string, value: string) => ({ role: 'tool' as const, content: [{ type: 'tool-result' as const, callId, name: 't', content: [{ type: 'text' as const, text: value }] }] })
    const messages = historyOf([
      userText('go'),
      { role: 'assistant', content: [{ type: 'tool-call', id: 'a', name: 't', args: {} }] },
      result('old', 'stale'),
      { role: 'assistant', content: [{ type: 'tool-call', id: 'b', name: 't', args: {} }, { type: 'tool-call', id: 'c', name: 't', args: {} }] },
      result('b', 'first'),
      result('c', 'second'),
    ])
    let text = ''
    for await (const chunk of adapter.stream({ model: 's', system: '', messages, tools: [], signal: new AbortController().signal, origin: { sessionId: 's1' } })) {
      if (chunk.type === 'text-delta') text += chunk.text
    }
    expect(text).toBe('got: first\nsecond / last: second')
  })
})
