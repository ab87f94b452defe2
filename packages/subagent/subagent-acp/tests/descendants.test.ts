/**
 * Descendants a `dsh acp` child names below it: each well-formed `_meta.dsh.descendant`
 * report becomes a `DescendantEvent` naming the parent, provider, label and call of the
 * child it came through (the plugin emits it as `subagent/descendant`, which the hooks
 * plugin fires SubagentStart/SubagentStop from); a malformed one is dropped and said.
 */
import { afterEach, describe, expect, it } from 'vitest'
import { text } from '@dsh/llm'
import { SubagentService } from '@dsh/subagent'
import { AcpProvider, AcpProviderConfig, resolveAcpSpec, type DescendantEvent } from '@dsh/subagent-acp'
import { createHarness, type Harness } from '@dsh/testkit/harness'
import { FAST, fixture } from './helpers.js'

let harness: Harness | undefined
afterEach(async () => {
  await harness?.dispose()
  harness = undefined
})

describe('acp: descendants named by the child', () => {
  it('a well-formed report is told with the child it came through; each malformed one is dropped with a reason', async () => {
    const h = (harness = await createHarness())
    await h.plugin(SubagentService)
    const told: DescendantEvent[] = []
    const dropped: string[] = []
    const spec = resolveAcpSpec(AcpProviderConfig({ ...FAST, command: process.execPath, args: [fixture('descendant-agent.mjs')] }))
    h.ctx.subagents.registerProvider(new AcpProvider('acp', { ...spec, progressDropped: (reason) => dropped.push(reason), descendantBelow: (info) => told.push(info) }))
    const parent = await h.agent()
    const run = await h.ctx.subagents.start('acp', { prompt: [text('go')], parent, label: 'remote', callId: 'call_7', signal: new AbortController().signal })
    expect((await run.result).stopReason).toBe('completed')
    const via = { parentId: parent.id, provider: 'acp', label: 'remote', callId: 'call_7' }
    expect(told).toEqual([
      { ...via, event: 'start', id: 'grand-1', path: ['reviewer "look"'], helper: 'reviewer' },
      { ...via, event: 'end', id: 'grand-1', path: ['reviewer "look"'], helper: 'reviewer', stopReason: 'completed' },
    ])
    expect(dropped.filter((reason) => reason.includes('_meta.dsh.descendant'))).toHaveLength(3)
  })

  it("a child started from a helper is named by it too (childHelper), as the approval broker names it", async () => {
    const h = (harness = await createHarness())
    await h.plugin(SubagentService)
    const told: DescendantEvent[] = []
    const spec = resolveAcpSpec(AcpProviderConfig({ ...FAST, command: process.execPath, args: [fixture('descendant-agent.mjs')] }))
    h.ctx.subagents.registerProvider(new AcpProvider('acp', { ...spec, descendantBelow: (info) => told.push(info) }))
    const parent = await h.agent()
    const run = await h.ctx.subagents.start('acp', { prompt: [text('go')], parent, label: 'remote', helper: { name: 'auditor', hash: 'h' }, signal: new AbortController().signal })
    expect((await run.result).stopReason).toBe('completed')
    expect(told.map((info) => info.childHelper)).toEqual(['auditor', 'auditor'])
  })
})
