import { afterEach, describe, expect, it } from 'vitest'
import { createHarness, type Harness } from '@dsh/testkit/harness'
import { text } from '@dsh/llm'
import { SubagentService, type SubagentProgressInfo, type SubagentRunEndInfo } from '@dsh/subagent'
import { ForkPlugin } from '@dsh/subagent-fork'

const SCRIPT = [
  { when: { prompt: '^branch' }, reply: [{ text: 'the fork checks', call: { tool: 'probe', args: { side: 'fork' } } }, { delay_ms: 30, text: 'fork finished' }] },
  { reply: [{ text: 'parent calls', call: { tool: 'probe', args: { side: 'parent' } } }, { text: 'parent settled' }] },
]

let harness: Harness | undefined
afterEach(async () => {
  await harness?.dispose()
  harness = undefined
})

describe('live progress of fork children', () => {
  it('reports only the fork\'s own work, not the parent conversation it was seeded with, before its end', async () => {
    const h = (harness = await createHarness({ script: SCRIPT }))
    await h.plugin(SubagentService, { progressIntervalMs: 15 })
    await h.plugin(ForkPlugin, {})
    h.ctx.tools.register({ name: 'probe', description: 'looks', parameters: { type: 'object' }, execute: () => 'seen' })
    const parent = await h.agent()
    await parent.followup('start the parent')
    const heard: Array<['progress', SubagentProgressInfo] | ['end', SubagentRunEndInfo]> = []
    h.ctx.on('subagent/progress', (info) => void heard.push(['progress', info]))
    h.ctx.on('subagent/end', (info) => void heard.push(['end', info]))
    const run = await h.ctx.subagents.start('fork', { prompt: [text('branch off')], parent, signal: new AbortController().signal })
    await run.result
    expect(heard.at(-1)![0]).toBe('end')
    const updates = heard.flatMap((entry) => (entry[0] === 'progress' ? entry[1].updates : []))
    const said = updates.flatMap((update) => (update.kind === 'text' ? [update.text] : [])).join('')
    expect(said).toBe('the fork checksfork finished')
    const starts = updates.filter((update) => update.kind === 'tool-start')
    expect(starts).toEqual([expect.objectContaining({ name: 'probe', args: JSON.stringify({ side: 'fork' }) })])
    expect((heard.at(-1)![1] as SubagentRunEndInfo).usage!.outputTokens).toBeGreaterThan(0)
  })
})
