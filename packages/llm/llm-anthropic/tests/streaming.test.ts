import { LlmError, text, userText, type Message } from '@dsh/llm'
import { describe, expect, it } from 'vitest'
import { bodyOf, collect, failureOf, fakeEndpoint, ofType, requestOf } from './helpers.js'

describe('streaming a Messages response', () => {
  it('passes each text delta on as it arrives, before the response ends', async () => {
    // The server waits before each event: a reader that buffered the response would see nothing until message_stop.
    const { server, adapter } = await fakeEndpoint([{ text: 'The quick brown fox', eventDelayMs: 20 }])
    const seen: string[] = []
    let completedWhenFirstSeen: boolean | undefined
    for await (const chunk of adapter.stream(requestOf())) {
      if (chunk.type !== 'text-delta') continue
      if (seen.length === 0) completedWhenFirstSeen = await Promise.race([server.messageRequests[0]!.closed.then(() => true), new Promise<boolean>((resolve) => setImmediate(() => resolve(false)))])
      seen.push(chunk.text)
    }
    expect(seen.length).toBeGreaterThanOrEqual(3)
    expect(seen.join('')).toBe('The quick brown fox')
    expect(completedWhenFirstSeen).toBe(false)
  })

  it('assembles a tool_use block from its input_json_delta fragments into one tool call', async () => {
    const { adapter } = await fakeEndpoint([{ text: 'Reading.', toolUses: [{ id: 'toolu_1', name: 'read_file', input: { path: 'src/index.ts', lines: [1, 20] } }] }])
    const chunks = await collect(adapter.stream(requestOf()))
    expect(ofType(chunks, 'tool-call')).toEqual([{ type: 'tool-call', call: { type: 'tool-call', id: 'toolu_1', name: 'read_file', args: { path: 'src/index.ts', lines: [1, 20] } } }])
    expect(chunks.at(-1)).toEqual({ type: 'finish', reason: 'tool-calls' })
  })

  it('keeps model JSON that is not an object as rawArgs with args undefined, so the tool layer says why', async () => {
    const { adapter } = await fakeEndpoint([{ toolUses: [{ name: 'bash', input: '{"command": "ls -la' }, { name: 'bash', input: '[1, 2]' }] }])
    const calls = ofType(await collect(adapter.stream(requestOf())), 'tool-call').map((chunk) => chunk.call)
    expect(calls.map(({ args, rawArgs }) => ({ args, rawArgs }))).toEqual([
      { args: undefined, rawArgs: '{"command": "ls -la' },
      { args: undefined, rawArgs: '[1, 2]' },
    ])
  })

  it('sends a tool call and its result back as tool_use and tool_result blocks: a round trip', async () => {
    const { server, adapter } = await fakeEndpoint([{ toolUses: [{ id: 'toolu_rt', name: 'list_dir', input: { path: '.' } }] }, { text: 'Two files.' }])
    const tools = [{ name: 'list_dir', description: 'List a directory', parameters: { type: 'object', properties: { path: { type: 'string' } } } }]
    const first = ofType(await collect(adapter.stream(requestOf({ tools }))), 'tool-call')[0]!.call
    const history: Message[] = [
      userText('what is here?'),
      { role: 'assistant', content: [first] },
      { role: 'tool', content: [{ type: 'tool-result', callId: first.id, name: first.name, content: [text('a.ts\nb.ts')] }] },
    ]
    const chunks = await collect(adapter.stream(requestOf({ tools, messages: history })))
    expect(ofType(chunks, 'text-delta').map((chunk) => chunk.text).join('')).toBe('Two files.')
    const sent = bodyOf(server, 2).messages as { role: string; content: { type: string }[] }[]
    expect(sent.map((message) => message.role)).toEqual(['user', 'assistant', 'user'])
    expect(sent[1]!.content[0]).toMatchObject({ type: 'tool_use', id: 'toolu_rt', name: 'list_dir', input: { path: '.' } })
    expect(sent[2]!.content[0]).toMatchObject({ type: 'tool_result', tool_use_id: 'toolu_rt', content: [{ type: 'text', text: 'a.ts\nb.ts' }] })
    expect(bodyOf(server, 2).tools).toEqual([{ name: 'list_dir', description: 'List a directory', input_schema: { type: 'object', properties: { path: { type: 'string' } } }, cache_control: { type: 'ephemeral' } }])
  })

  it('maps usage with cache reads and writes: input counts every input token, hits and writes apart', async () => {
    const { adapter } = await fakeEndpoint([{ text: 'ok', usage: { inputTokens: 12, outputTokens: 7, cacheReadInputTokens: 2048, cacheCreationInputTokens: 300 } }])
    const chunks = await collect(adapter.stream(requestOf()))
    expect(chunks.slice(-2)).toEqual([
      { type: 'usage', usage: { inputTokens: 12 + 2048 + 300, outputTokens: 7, cacheHitInputTokens: 2048, cacheWriteInputTokens: 300 } },
      { type: 'finish', reason: 'stop' },
    ])
  })

  it.each([
    ['end_turn', 'stop'],
    ['stop_sequence', 'stop'],
    ['tool_use', 'tool-calls'],
    ['max_tokens', 'length'],
    ['refusal', 'content-filter'],
  ] as const)('maps stop_reason %s to %s', async (wire, reason) => {
    const { adapter } = await fakeEndpoint([{ text: 'some text', stopReason: wire }])
    expect((await collect(adapter.stream(requestOf()))).at(-1)).toEqual({ type: 'finish', reason })
  })

  it('fails pause_turn, which only server tools cause, as an incomplete response saying so', async () => {
    const { adapter } = await fakeEndpoint([{ text: 'partial', stopReason: 'pause_turn' }])
    const error = await failureOf(adapter.stream(requestOf()))
    expect(error).toBeInstanceOf(LlmError)
    expect(error.code).toBe('INCOMPLETE_RESPONSE')
    expect(error.message).toContain('pause_turn')
  })

  it('sends max_tokens, the system prompt as a block, and stream: true', async () => {
    const { server, adapter } = await fakeEndpoint([{ text: 'ok' }], { maxTokens: 1234 })
    await collect(adapter.stream(requestOf({ system: 'Be brief.' })))
    expect(bodyOf(server, 1)).toMatchObject({ model: 'claude-x', max_tokens: 1234, stream: true, system: [{ type: 'text', text: 'Be brief.', cache_control: { type: 'ephemeral' } }] })
  })
})
