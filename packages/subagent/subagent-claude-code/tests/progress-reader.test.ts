/**
 * The mapping of the SDK's messages to progress, over crafted messages: the cases the real
 * binary does not produce on demand (results for unknown calls, a subagent's messages).
 */
import { describe, expect, it } from 'vitest'
import type { SDKMessage, SDKResultMessage } from '@anthropic-ai/claude-agent-sdk'
import type { SubagentProgress } from '@dsh/subagent'
import { ClaudeCodeProgressReader, usageOfResult } from '../src/index.js'

/** A message with only the fields the reader looks at. */
const message = (fields: Record<string, unknown>) => ({ parent_tool_use_id: null, ...fields }) as unknown as SDKMessage
const assistant = (content: unknown[], parent: string | null = null) => message({ type: 'assistant', message: { content }, parent_tool_use_id: parent })
const toolResult = (id: string, isError = false) => message({ type: 'user', message: { role: 'user', content: [{ type: 'tool_result', tool_use_id: id, is_error: isError }] } })
const delta = (textDelta: string) => message({ type: 'stream_event', event: { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: textDelta } } })

function reader(reporting = true): { read(m: SDKMessage): void; heard: SubagentProgress[]; dropped: string[] } {
  const heard: SubagentProgress[] = []
  const dropped: string[] = []
  const progress = new ClaudeCodeProgressReader({ reporting, report: (update) => void heard.push(update) }, (reason) => dropped.push(reason))
  return { read: (m) => progress.read(m), heard, dropped }
}

describe('claude-code progress mapping', () => {
  it('a message missing the fields the reader needs is dropped with a reason, and later messages still map', () => {
    const r = reader()
    const broken = [
      message({ type: 'stream_event' }),
      message({ type: 'stream_event', event: { type: 'content_block_delta' } }),
      message({ type: 'user' }),
      message({ type: 'user', message: { content: [null] } }),
      message({ type: 'assistant', message: {} }),
    ]
    for (const each of broken) expect(() => r.read(each)).not.toThrow()
    expect(r.dropped).toHaveLength(broken.length)
    expect(r.dropped[0]).toMatch(/^a malformed stream_event message/)
    r.read(assistant([{ type: 'tool_use', id: 'tu_9', name: 'Read', input: {} }]))
    expect(r.heard).toEqual([{ kind: 'tool-start', callId: 'tu_9', name: 'Read', args: '{}' }])
  })

  it('tool_use and tool_result become tool-start and tool-end; results for unknown or already-ended calls are dropped and logged', () => {
    const r = reader()
    r.read(assistant([{ type: 'tool_use', id: 'tu_1', name: 'Bash', input: { command: 'ls' } }]))
    r.read(toolResult('tu_ghost'))
    r.read(toolResult('tu_1', true))
    r.read(toolResult('tu_1'))
    expect(r.heard).toEqual([
      { kind: 'tool-start', callId: 'tu_1', name: 'Bash', args: '{"command":"ls"}' },
      { kind: 'tool-end', callId: 'tu_1', name: 'Bash', ok: false },
    ])
    expect(r.dropped).toEqual(['a tool_result for "tu_ghost", a tool_use never seen', 'a second tool_result for "tu_1"'])
  })

  it('text that streamed as deltas is not repeated by its assistant message; a message that did not stream is reported whole', () => {
    const r = reader()
    r.read(message({ type: 'stream_event', event: { type: 'message_start', message: {} } }))
    r.read(delta('Hel'))
    r.read(delta('lo'))
    r.read(assistant([{ type: 'text', text: 'Hello' }]))
    r.read(message({ type: 'stream_event', event: { type: 'message_start', message: {} } }))
    r.read(assistant([{ type: 'text', text: 'Whole.' }]))
    expect(r.heard).toEqual([
      { kind: 'text', text: 'Hel' },
      { kind: 'text', text: 'lo' },
      { kind: 'text', text: 'Whole.' },
    ])
  })

  it('Claude Code\'s own subagents\' messages are not the child\'s progress, and nothing is built when nobody listens', () => {
    const r = reader()
    r.read(assistant([{ type: 'text', text: 'nested' }, { type: 'tool_use', id: 'tu_9', name: 'Read', input: {} }], 'tu_parent'))
    expect(r.heard).toEqual([])
    const idle = reader(false)
    idle.read(assistant([{ type: 'text', text: 'unheard' }]))
    idle.read(toolResult('tu_never'))
    expect(idle.heard).toEqual([])
    expect(idle.dropped).toEqual([])
  })

  it('a result\'s usage counts cache reads and writes as input, cache reads as cached', () => {
    const result = { type: 'result', usage: { input_tokens: 10, output_tokens: 5, cache_read_input_tokens: 200, cache_creation_input_tokens: 30 } } as unknown as SDKResultMessage
    expect(usageOfResult(result)).toEqual({ inputTokens: 240, outputTokens: 5, cachedInputTokens: 200 })
    expect(usageOfResult({ type: 'result', usage: { input_tokens: -1, output_tokens: 5 } } as unknown as SDKResultMessage)).toBeUndefined()
  })
})
