import { describe, expect, it } from 'vitest'
import type { SDKResultMessage } from '@anthropic-ai/claude-agent-sdk'
import { text, type AssistantMessage } from '@dsh/llm'
import { resultOf, type Denial } from '../src/index.js'

/** A result message with only the fields the mapping reads; the rest is irrelevant to it. */
function result(fields: Record<string, unknown>): SDKResultMessage {
  return { type: 'result', subtype: 'success', is_error: false, result: '', stop_reason: 'end_turn', permission_denials: [], ...fields } as unknown as SDKResultMessage
}

const streamed: AssistantMessage[] = [{ role: 'assistant', content: [text('partial work')] }]

describe('claude-code outcome mapping', () => {
  it('success with is_error false and text is completed, with that text as the output', () => {
    expect(resultOf(result({ result: 'All done.' }), streamed, [])).toEqual({ output: [text('All done.')], stopReason: 'completed' })
  })

  it('success with is_error true is an error (the API error text in the diagnostic), keeping partial output', () => {
    const mapped = resultOf(result({ is_error: true, api_error_status: 529, result: 'API Error: 529 overloaded' }), streamed, [])
    expect(mapped.stopReason).toBe('error')
    expect(mapped.output).toEqual([text('partial work')])
    expect(mapped.diagnostic).toBe('Claude Code ended with an error result (subtype success, is_error true, API status 529, stop reason end_turn): API Error: 529 overloaded')
  })

  it('success with blank text is an error', () => {
    const mapped = resultOf(result({ result: '  \n' }), [], [])
    expect(mapped).toMatchObject({ stopReason: 'error', output: [] })
    expect(mapped.diagnostic).toContain('the child finished without any text')
  })

  it('an error subtype is an error naming the subtype and the errors', () => {
    const mapped = resultOf(result({ subtype: 'error_max_turns', is_error: true, errors: ['reached the turn limit'], stop_reason: null }), [], [])
    expect(mapped.stopReason).toBe('error')
    expect(mapped.diagnostic).toBe('Claude Code ended with an error result (subtype error_max_turns, is_error true): reached the turn limit')
  })

  it('denials from our asks and from the result are named once each, on completed runs too', () => {
    const asked: Denial[] = [{ tool: 'Bash', toolUseId: 'toolu_1', input: '{"command":"ls"}' }]
    const mapped = resultOf(
      result({
        result: 'ok',
        permission_denials: [
          { tool_name: 'Bash', tool_use_id: 'toolu_1', tool_input: { command: 'ls' } },
          { tool_name: 'Write', tool_use_id: 'toolu_2', tool_input: { file_path: '/x' } },
        ],
      }),
      [],
      asked,
    )
    expect(mapped).toEqual({ output: [text('ok')], stopReason: 'completed', diagnostic: 'denied 2 tool permission asks: Bash {"command":"ls"}, Write {"file_path":"/x"}' })
  })
})
