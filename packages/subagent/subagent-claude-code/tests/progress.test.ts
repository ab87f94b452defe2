/**
 * Live progress from Claude Code children: the real binary through the Agent SDK, against
 * the fake Messages API on 127.0.0.1, paced so each run takes a while.
 */
import { afterEach, describe, expect, it } from 'vitest'
import { text } from '@dsh/llm'
import { listenToChildren, textOf, updatesAsSent } from '@dsh/testkit/delegation'
import { setup, type Fixture } from './fixture.js'

let fixture: Fixture | undefined
afterEach(async () => {
  await fixture?.dispose()
  fixture = undefined
})

describe('claude-code: live progress', () => {
  it('tool calls, streamed text and usage arrive in order before subagent/end, each attributed to its own child (two at once)', async () => {
    // Each child: a Read of a missing file (its result is an error), then a paced answer.
    const answer = (who: string) => [
      { toolUses: [{ name: 'Read', input: { file_path: `/nonexistent/${who}.md` } }], usage: { inputTokens: 100, outputTokens: 20 } },
      { text: `${who} read nothing at all.`, eventDelayMs: 100, usage: { inputTokens: 150, outputTokens: 10 } },
    ]
    fixture = await setup([], {}, { progressIntervalMs: 20 })
    // Two children at once take the fake's answers in arrival order: answer by prompt instead.
    const byPrompt = (request: { body: unknown }) => {
      const who = JSON.stringify(request.body).includes('child alpha') ? 'alpha' : 'beta'
      const turns = JSON.stringify(request.body).includes('tool_result') ? 1 : 0
      return answer(who)[turns]!
    }
    fixture.fake.enqueue(byPrompt, byPrompt, byPrompt, byPrompt)
    const { harness, start } = fixture
    const heard = listenToChildren(harness.ctx)
    const runs = await Promise.all([start('you are child alpha'), start('you are child beta')])
    const results = await Promise.all(runs.map((run) => run.result))
    for (const [index, who] of ['alpha', 'beta'].entries()) {
      const run = runs[index]!
      const result = results[index]!
      expect(result).toMatchObject({ stopReason: 'completed', output: [text(`${who} read nothing at all.`)] })
      // The result's main-loop usage: both model calls of the run.
      expect(result.usage).toEqual({ inputTokens: 250, outputTokens: 30, cachedInputTokens: 0 })
      const mine = heard.filter((entry) => entry.info.id === run.id)
      expect(mine.at(-1)).toMatchObject({ kind: 'end', info: { usage: result.usage } })
      expect(mine.filter((entry) => entry.kind === 'progress').length).toBeGreaterThan(1)
      const updates = updatesAsSent(heard, run.id)
      const start = updates.findIndex((update) => update.kind === 'tool-start')
      const end = updates.findIndex((update) => update.kind === 'tool-end')
      expect(updates[start]).toMatchObject({ kind: 'tool-start', name: 'Read', args: expect.stringContaining(`/nonexistent/${who}.md`) })
      expect(updates[end]).toMatchObject({ kind: 'tool-end', callId: (updates[start] as { callId: string }).callId, name: 'Read', ok: false })
      expect(start).toBeLessThan(end)
      expect(textOf(updates)).toBe(`${who} read nothing at all.`)
      expect(updates.filter((update) => update.kind === 'usage').at(-1)).toEqual({ kind: 'usage', usage: result.usage })
    }
    await Promise.all(runs.map((run) => run.dispose()))
  })
})
