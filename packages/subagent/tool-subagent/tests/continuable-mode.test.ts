import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { createHarness, type Harness, type HarnessOptions } from '@dsh/testkit/harness'
import { textOf } from '@dsh/llm'
import type { Agent } from '@dsh/agent'
import SessionJsonl from '@dsh/session-jsonl'
import { SubagentService, type SubagentProvider } from '@dsh/subagent'
import { SpawnPlugin } from '@dsh/subagent-spawn'
import { SubagentToolPlugin } from '@dsh/tool-subagent'

let harness: Harness | undefined
let dir: string | undefined
afterEach(async () => {
  await harness?.dispose()
  if (dir) await rm(dir, { recursive: true, force: true })
  harness = undefined
  dir = undefined
})

async function setup(script: HarnessOptions['script']): Promise<Harness> {
  const h = (harness = await createHarness({ script }))
  dir = await mkdtemp(join(tmpdir(), 'dsh-tool-continuable-'))
  await h.plugin(SessionJsonl, { dir })
  await h.plugin(SubagentService)
  await h.plugin(SpawnPlugin, {})
  return h
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

  it('a provider that cannot continue fails the mount naming the tool and the provider', async () => {
    const h = await setup([{ reply: [{ text: 'x' }] }])
    const oneShot: SubagentProvider = { name: 'one-shot', capabilities: { outputSchema: false, depthLimit: false, toolFilter: false, persona: false }, inheritsParentContext: false, start: () => Promise.reject(new Error('unused')) }
    h.ctx.subagents.registerProvider(oneShot)
    await expect(h.plugin(SubagentToolPlugin, { provider: 'one-shot', toolName: 'ask', backgroundMode: 'continuable' })).rejects.toThrow(/tool "ask" sets backgroundMode continuable, but subagent provider "one-shot"/)
    expect(h.ctx.tools.list()).not.toContain('ask')
  })
})
