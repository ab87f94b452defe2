import { text, userText, type Message, type ToolSpec } from '@dsh/llm'
import type { ChatCompletionCreateParamsStreaming } from 'openai/resources/chat/completions'
import { describe, expect, it } from 'vitest'
import { collect, fakeEndpoint, requestOf } from './helpers.js'

const readFile: ToolSpec = {
  name: 'read_file',
  description: 'Read a file from the workspace.',
  parameters: { type: 'object', properties: { path: { type: 'string' } }, required: ['path'] },
}

/** A conversation with every kind of block: reasoning, text, parsed and raw tool calls, results. */
const history: Message[] = [
  userText('What is in a.ts and b.ts?'),
  {
    role: 'assistant',
    content: [
      { type: 'reasoning', text: 'I should read both files.' },
      text('Let me look.'),
      { type: 'tool-call', id: 'call_1', name: 'read_file', args: { path: 'a.ts' } },
      { type: 'tool-call', id: 'call_2', name: 'read_file', args: undefined, rawArgs: '{"path": b.ts}' },
    ],
  },
  {
    role: 'tool',
    content: [
      { type: 'tool-result', callId: 'call_1', name: 'read_file', content: [text('export const a = 1')] },
      { type: 'tool-result', callId: 'call_2', name: 'read_file', content: [text('arguments are not JSON')], isError: true },
    ],
  },
  { role: 'assistant', content: [{ type: 'reasoning', text: 'Done reading.' }, text('a.ts exports a.')] },
  { role: 'user', content: [{ type: 'tool-result', callId: 'call_9', name: 'read_file', content: [text('late result')] }, text('Thanks!')] },
]

async function sentBody(parts: Parameters<typeof requestOf>[0], options = {}) {
  const { server, adapter } = await fakeEndpoint([{ text: 'ok' }], options)
  await collect(adapter.stream(requestOf(parts)))
  expect(server.requests).toHaveLength(1)
  return { body: server.requests[0]!.body as ChatCompletionCreateParamsStreaming, request: server.requests[0]! }
}

describe('the request on the wire', () => {
  it('carries the system prompt first, then the history with tool calls and tool results', async () => {
    const { body } = await sentBody({ model: 'deepseek-chat', system: 'You are terse.', messages: history })
    expect(body.model).toBe('deepseek-chat')
    expect(body.messages).toEqual([
      { role: 'system', content: 'You are terse.' },
      { role: 'user', content: 'What is in a.ts and b.ts?' },
      {
        role: 'assistant',
        content: 'Let me look.',
        tool_calls: [
          { id: 'call_1', type: 'function', function: { name: 'read_file', arguments: '{"path":"a.ts"}' } },
          { id: 'call_2', type: 'function', function: { name: 'read_file', arguments: '{"path": b.ts}' } },
        ],
        reasoning_content: 'I should read both files.',
      },
      { role: 'tool', tool_call_id: 'call_1', content: 'export const a = 1' },
      { role: 'tool', tool_call_id: 'call_2', content: 'Error: arguments are not JSON' },
      { role: 'assistant', content: 'a.ts exports a.' },
      { role: 'tool', tool_call_id: 'call_9', content: 'late result' },
      { role: 'user', content: 'Thanks!' },
    ])
  })

  it('drops all reasoning when replayReasoning is off', async () => {
    const { body } = await sentBody({ messages: history }, { replayReasoning: false })
    expect(JSON.stringify(body.messages)).not.toMatch(/reasoning/)
  })

  it('sends tools as function tools with their JSON Schema', async () => {
    const { body } = await sentBody({ tools: [readFile] })
    expect(body.tools).toEqual([{ type: 'function', function: { name: 'read_file', description: 'Read a file from the workspace.', parameters: readFile.parameters } }])
  })

  it('omits the tools field and the system message when there are none', async () => {
    const { body } = await sentBody({ system: '' })
    expect(body).not.toHaveProperty('tools')
    expect(body.messages).toEqual([{ role: 'user', content: 'hi' }])
  })

  it('asks for a stream with usage, authorised with the key', async () => {
    const { body, request } = await sentBody({})
    expect(body.stream).toBe(true)
    expect(body.stream_options).toEqual({ include_usage: true })
    expect(request.path).toBe('/v1/chat/completions')
    expect(request.headers.authorization).toBe('Bearer sk-test')
  })
})
