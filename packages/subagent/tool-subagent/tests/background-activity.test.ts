import { describe, expect, it } from 'vitest'
import type { SubagentProgress, SubagentProgressInfo } from '@dsh/subagent'
import { BackgroundActivity } from '../src/background-activity.js'

let seq = 0
function event(updates: SubagentProgress[], dropped?: SubagentProgressInfo['dropped']): SubagentProgressInfo {
  return { runId: 'r', provider: 'spawn', id: 'child', local: true, parentId: 'parent', seq: ++seq, updates, ...(dropped && { dropped }) }
}

describe('a background child\'s activity for task_output', () => {
  it('hands out text, tools and failures since the previous read, each tool on a line of its own', () => {
    const activity = new BackgroundActivity()
    activity.record(event([{ kind: 'text', text: 'looking' }, { kind: 'tool-start', callId: 'c1', name: 'bash', args: '{"command":"ls"}' }]))
    const first = activity.read(0)
    expect(first.text).toBe('looking\n→ bash {"command":"ls"}\n')
    activity.record(event([{ kind: 'tool-end', callId: 'c1', name: 'bash', ok: true }, { kind: 'usage', usage: { inputTokens: 5, outputTokens: 1, cachedInputTokens: 0 } }]))
    expect(activity.read(first.next)).toEqual({ text: '', next: first.next, skipped: 0 })
    activity.record(event([{ kind: 'tool-start', callId: 'c2', name: 'read', args: 'a.txt' }, { kind: 'tool-end', callId: 'c2', name: 'read', ok: false, detail: 'no such file' }, { kind: 'status', text: 'step 2 of 3' }]))
    expect(activity.read(first.next).text).toBe('→ read a.txt\n✗ read failed: no such file\n[status] step 2 of 3\n')
  })

  it('keeps at most its bound unread, dropping the oldest and saying how much went', () => {
    const activity = new BackgroundActivity(100)
    for (let i = 0; i < 30; i++) activity.record(event([{ kind: 'text', text: `chunk-${String(i).padStart(2, '0')} ` }]))
    const slice = activity.read(0)
    expect(slice.skipped).toBe(30 * 9 - 100)
    expect(slice.text).toBe(`[… ${30 * 9 - 100} characters of earlier activity were dropped before this read]\n${Array.from({ length: 30 }, (_, i) => `chunk-${String(i).padStart(2, '0')} `).join('').slice(-100)}`)
    expect(slice.next).toBe(30 * 9)
  })

  it('says what the progress channel itself left out', () => {
    const activity = new BackgroundActivity()
    activity.record(event([{ kind: 'text', text: 'tail' }], { updates: 3, textChars: 120 }))
    expect(activity.read(0).text).toBe('[… the child outran its progress: 3 updates and 120 characters of text not shown]\ntail')
  })

  it('once settled, every read returns the answer, superseding unread activity', () => {
    const activity = new BackgroundActivity()
    activity.record(event([{ kind: 'text', text: 'the answer is 42' }]))
    activity.settle({ status: 'completed', output: 'the answer is 42' })
    activity.record(event([{ kind: 'text', text: 'late' }]))
    const first = activity.read(0)
    expect(first).toEqual({ text: 'the answer is 42', next: 16, skipped: 0 })
    expect(activity.read(first.next).text).toBe('the answer is 42')
  })
})
