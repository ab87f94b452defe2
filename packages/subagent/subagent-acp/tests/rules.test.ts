import { describe, expect, it } from 'vitest'
import { stopReasonOfAcp as stopReasonOf } from '@dsh/base'
import { answerPermission, StdoutGuard } from '@dsh/subagent-acp'

describe('acp rules', () => {
  it('ACP stop reasons map onto the seam; anything unknown is an error', () => {
    expect(['end_turn', 'max_tokens', 'refusal', 'cancelled', 'max_turn_requests', 'something_new'].map(stopReasonOf)).toEqual([
      'completed', 'max-tokens', 'refusal', 'aborted', 'error', 'error',
    ])
  })

  it('permission: reject picks the first reject option, allow the first allow option, cancelling always cancels', () => {
    const options = [
      { optionId: 'a1', name: 'allow', kind: 'allow_once' as const },
      { optionId: 'r1', name: 'reject always', kind: 'reject_always' as const },
      { optionId: 'r2', name: 'reject', kind: 'reject_once' as const },
      { optionId: 'a2', name: 'always', kind: 'allow_always' as const },
    ]
    expect(answerPermission('reject', options, false)).toEqual({ outcome: { outcome: 'selected', optionId: 'r1' } })
    expect(answerPermission('allow', options, false)).toEqual({ outcome: { outcome: 'selected', optionId: 'a1' } })
    expect(answerPermission('allow', options, true)).toEqual({ outcome: { outcome: 'cancelled' } })
    expect(answerPermission('allow', options.slice(1, 3), false)).toEqual({ outcome: { outcome: 'cancelled' } })
  })

  it('the stdout guard reports the first line that is not a JSON object, across chunk boundaries, and passes every byte on', async () => {
    const guard = new StdoutGuard()
    const seen: string[] = []
    guard.onGarbage = (line) => seen.push(line)
    const writer = guard.stream.writable.getWriter()
    const reader = guard.stream.readable.getReader()
    const encoder = new TextEncoder()
    const chunks = ['{"jsonrpc":"2.0","id":0,', '"result":{}}\n\n', 'Usage: tool [op', 'tions]\n', '{"more":1}\n']
    const passed: string[] = []
    for (const chunk of chunks) {
      void writer.write(encoder.encode(chunk))
      passed.push(new TextDecoder().decode((await reader.read()).value))
    }
    expect(passed.join('')).toBe(chunks.join(''))
    expect(seen).toEqual(['Usage: tool [options]'])
  })

  it('a disarmed guard looks at nothing', async () => {
    const guard = new StdoutGuard()
    let called = false
    guard.onGarbage = () => (called = true)
    guard.disarm()
    const writer = guard.stream.writable.getWriter()
    void writer.write(new TextEncoder().encode('not json\n'))
    await guard.stream.readable.getReader().read()
    expect(called).toBe(false)
  })
})
