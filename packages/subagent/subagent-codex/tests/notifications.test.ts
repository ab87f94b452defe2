/**
 * The reading of app-server notifications into the run's events, over crafted messages: the
 * cases the real binary and the fake server do not produce on demand.
 */
import { describe, expect, it } from 'vitest'
import type { SubagentProgress } from '@dsh/subagent'
import { readNotification } from '../src/app-server-events.js'
import { CodexTurnReader } from '../src/turn-reader.js'

const counts = (inputTokens: number, outputTokens: number, cachedInputTokens = 0) => ({ inputTokens, outputTokens, cachedInputTokens, reasoningOutputTokens: 0, totalTokens: inputTokens + outputTokens })
const usageUpdate = (last: ReturnType<typeof counts>, total: ReturnType<typeof counts>, turnId: string | null = 'turn-1') =>
  readNotification('thread/tokenUsage/updated', { threadId: 'th', ...(turnId !== null && { turnId }), tokenUsage: { last, total } })!

function reader() {
  const heard: SubagentProgress[] = []
  const dropped: string[] = []
  const turn = new CodexTurnReader({ reporting: true, report: (update) => void heard.push(update) }, (reason) => dropped.push(reason))
  return { turn, heard, dropped }
}

describe('codex notifications', () => {
  it('progress-only notifications that do not say whose turn they are are dropped, never a protocol error', () => {
    const item = { type: 'commandExecution', id: 'c1', command: 'ls', status: 'inProgress' }
    const unnamed = [
      readNotification('item/started', { threadId: 'th', item }),
      readNotification('item/completed', { turnId: 'turn-1', item }),
      readNotification('turn/plan/updated', { threadId: 'th', plan: [] }),
      readNotification('thread/tokenUsage/updated', { tokenUsage: {} }),
    ]
    for (const event of unnamed) expect(event).toMatchObject({ type: 'dropped', reason: expect.stringMatching(/without a string threadId/) })
  })

  it('the answer still needs its ids: an agent message without them breaks the protocol', () => {
    expect(() => readNotification('item/completed', { threadId: 'th', item: { type: 'agentMessage', id: 'm', text: 'hi' } })).toThrow(/turnId/)
  })

  it('a thread-level usage update (no turnId) is read as usage of the thread, not a protocol error', () => {
    const event = usageUpdate(counts(10, 2), counts(10, 2), null)
    expect(event).toMatchObject({ type: 'token-usage', threadId: 'th' })
    expect(event.type === 'token-usage' && event.turnId).toBeUndefined()
  })

  it('usage re-sent unchanged (rate-limit updates, the next turn\'s start) is not counted twice', () => {
    const { turn, heard } = reader()
    turn.read(usageUpdate(counts(100, 10, 40), counts(100, 10, 40)))
    // Re-sent with a rate-limit update: the thread total did not move.
    turn.read(usageUpdate(counts(100, 10, 40), counts(100, 10, 40)))
    turn.read(usageUpdate(counts(150, 5, 90), counts(250, 15, 130)))
    turn.read(usageUpdate(counts(150, 5, 90), counts(250, 15, 130)))
    const result = turn.result('completed', undefined)
    expect(result.usage).toEqual({ inputTokens: 250, outputTokens: 15, cachedInputTokens: 130 })
    expect(heard.filter((update) => update.kind === 'usage')).toHaveLength(2)
  })

  it('a conversation\'s next turn does not count the previous turn\'s last call again', () => {
    const baseline = {}
    const first = new CodexTurnReader({ reporting: false, report: () => {} }, () => {}, baseline)
    first.read(usageUpdate(counts(100, 10), counts(100, 10)))
    const second = new CodexTurnReader({ reporting: false, report: () => {} }, () => {}, baseline)
    second.read(usageUpdate(counts(100, 10), counts(100, 10), 'turn-2'))
    second.read(usageUpdate(counts(120, 8), counts(220, 18), 'turn-2'))
    expect(second.result('completed', undefined).usage).toEqual({ inputTokens: 120, outputTokens: 8, cachedInputTokens: 0 })
  })
})
