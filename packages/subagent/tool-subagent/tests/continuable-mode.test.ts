import { afterEach, describe, expect, it } from 'vitest'
import type { HarnessOptions } from '@dsh/testkit/harness'
import { createDelegationHarness, type DelegationHarness } from '@dsh/testkit/delegation'
import { textOf } from '@dsh/llm'
import type { Agent } from '@dsh/agent'
import type { SubagentProvider } from '@dsh/subagent'
import { SpawnPlugin } from '@dsh/subagent-spawn'
import { SubagentToolPlugin } from '@dsh/tool-subagent'

let harness: DelegationHarness | undefined
afterEach(async () => {
  await harness?.dispose()
  harness = undefined
})

async function setup(script: HarnessOptions['script']): Promise<DelegationHarness> {
  return (harness = await createDelegationHarness({ script, plugins: [[SpawnPlugin, {}]] }))
}

function userTexts(agent: Agent): string[] {
  return agent.session.ownEvents().flatMap((event) => (event.type === 'user/message' ? [textOf(event.message.content)] : []))
}

describe('subagent tool: backgroundMode continuable', () => {
  it('returns the child id at once and the settlement notice reaches the parent later', async () => {
    const h = await setup([
      { when: { prompt: '^audit' }, reply: [{ text: 'audit finished' }] },
      { reply: [{ call: { tool: 'subagent', args: { description: 'audit', prompt: 'audit the repo', run_in_background: true } } }, { text: 'started it' }, { text: 'noted the audit' }] },
    ])
    await h.plugin(SubagentToolPlugin, { provider: 'spawn', backgroundMode: 'continuable' })
    const parent = await h.agent()
    const first = await parent.followup('go')
    expect(first.reason).toBe('completed')
    const result = parent.session.ownEvents().find((e) => e.type === 'tool/result')
    const answer = result?.type === 'tool/result' ? textOf(result.result.content) : ''
    const childId = /^started continuable subagent (\S+)\./.exec(answer)?.[1]
    expect(childId).toBeDefined()
    expect(h.ctx.agents.get(childId!)?.session.header.descriptor).toMatchObject({ mode: 'continuable', label: 'audit' })
    await h.ctx.subagents.continuation.whenSettled(parent.id)
    await parent.whenIdle()
    const texts = userTexts(parent)
    expect(texts.at(-1)).toContain(`Subagent ${childId} finished its turn`)
    expect(texts.at(-1)).toContain('audit finished')
  })

  it('is always continuable: a call without run_in_background starts a kept child too, and the wording says so', async () => {
    const h = await setup([
      { when: { prompt: '^audit' }, reply: [{ text: 'audit finished' }] },
      { reply: [{ call: { tool: 'subagent', args: { description: 'audit', prompt: 'audit the repo' } } }, { text: 'started it' }, { text: 'noted the audit' }] },
    ])
    await h.plugin(SubagentToolPlugin, { provider: 'spawn', backgroundMode: 'continuable' })
    const tool = h.ctx.tools.get('subagent')!
    expect(tool.description).toContain('the call returns its id at once')
    expect(tool.description).not.toContain('Returns the subagent\'s final answer')
    const parent = await h.agent()
    await parent.followup('go')
    const result = parent.session.ownEvents().find((e) => e.type === 'tool/result')
    const childId = /^started continuable subagent (\S+)\./.exec(result?.type === 'tool/result' ? textOf(result.result.content) : '')?.[1]
    expect(h.ctx.agents.get(childId!)?.session.header.descriptor).toMatchObject({ mode: 'continuable', label: 'audit' })
    await h.ctx.subagents.continuation.whenSettled(parent.id)
    await parent.whenIdle()
    expect(userTexts(parent).at(-1)).toContain('audit finished')
  })

  it('a provider that cannot continue fails the mount naming the tool and the provider', async () => {
    const h = await setup([{ reply: [{ text: 'x' }] }])
    const oneShot: SubagentProvider = { name: 'one-shot', capabilities: { outputSchema: false, depthLimit: false, toolFilter: false, persona: false }, inheritsParentContext: false, start: () => Promise.reject(new Error('unused')) }
    h.ctx.subagents.registerProvider(oneShot)
    await expect(h.plugin(SubagentToolPlugin, { provider: 'one-shot', toolName: 'ask', backgroundMode: 'continuable' })).rejects.toThrow(/tool "ask" sets backgroundMode continuable, but subagent provider "one-shot"/)
    expect(h.ctx.tools.list()).not.toContain('ask')
  })
})
