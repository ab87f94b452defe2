import { afterEach, describe, expect, it } from 'vitest'
import { createHarness, type Harness, type HarnessOptions } from '@dsh/testkit/harness'
import { text } from '@dsh/llm'
import { SubagentService, type SubagentRequest } from '@dsh/subagent'
import { SpawnPlugin } from '@dsh/subagent-spawn'
import { ForkPlugin } from '@dsh/subagent-fork'
import { TaskService } from '@dsh/tasks'
import { TaskToolsPlugin } from '@dsh/tool-tasks'
import { BashService } from '@dsh/bash'
import { BashToolPlugin } from '@dsh/tool-bash'
import { SubagentToolPlugin } from '@dsh/tool-subagent'
import { SubagentControlPlugin } from '@dsh/tool-subagent-control'

let harness: Harness
afterEach(async () => {
  await harness?.dispose()
})

async function setup(script?: HarnessOptions['script'], subagentTool: Record<string, unknown> = {}) {
  harness = await createHarness({ ...(script && { script }), persona: 'P.' })
  await harness.plugin(SubagentService)
  await harness.plugin(SpawnPlugin, {})
  await harness.plugin(ForkPlugin, {})
  await harness.plugin(TaskService, {})
  await harness.plugin(TaskToolsPlugin)
  await harness.plugin(BashService)
  await harness.plugin(BashToolPlugin)
  await harness.plugin(SubagentToolPlugin, { provider: 'spawn', ...subagentTool })
  await harness.plugin(SubagentToolPlugin, { provider: 'fork', toolName: 'fork' })
}

/** The system prompt of each session's model requests, by session id. */
function captureSystems(): Map<string, string> {
  const systems = new Map<string, string>()
  const adapter = harness.ctx.llm.getAdapter('scripted')!
  const stream = adapter.stream.bind(adapter)
  adapter.stream = (request) => {
    systems.set(request.origin.sessionId, request.system)
    return stream(request)
  }
  return systems
}

const childTask = (parent: SubagentRequest['parent'], extra: Partial<SubagentRequest> = {}): SubagentRequest => ({ prompt: [text('child task')], parent, signal: new AbortController().signal, ...extra })

describe('tool guidance in the system prompt', () => {
  it('a root agent gets delegation guidance per subagent tool (fresh and fork), then background work, then shell', async () => {
    await setup(undefined)
    const root = await harness.agent()
    const composed = harness.ctx.agents.composeSystemPrompt(root)
    expect(composed.parts.map((part) => part.name)).toEqual(['persona', 'environment', 'subagent:fork', 'subagent:subagent', 'tasks', 'bash'])
    const byName = new Map(composed.parts.map((part) => [part.name, part.text]))
    expect(byName.get('subagent:subagent')).toContain('starts fresh: it sees nothing of this conversation')
    expect(byName.get('subagent:fork')).toContain('already sees this conversation up to')
    expect(byName.get('subagent:subagent')).toContain('several times in the same response and the children run in parallel')
    expect(byName.get('subagent:subagent')).toContain('collect the answer with task_output')
    expect(byName.get('tasks')).toContain('Do not poll')
    expect(byName.get('tasks')).toContain('task_output')
  })

  it('a child whose tool filter hides the subagent tool gets no guidance for it', async () => {
    await setup([{ when: { prompt: 'child task' }, reply: [{ text: 'done' }] }])
    const systems = captureSystems()
    const root = await harness.agent()
    const run = await harness.ctx.subagents.start('spawn', childTask(root, { toolFilter: { deny: ['subagent', 'fork'] } }))
    expect((await run.result).stopReason).toBe('completed')
    const child = systems.get(run.id)!
    expect(child.startsWith('P.\n\n# Environment')).toBe(true)
    expect(child).not.toContain('Delegating with')
    expect(child).toContain('# Background work')
  })

  it('a child at the depth bound gets no delegation guidance, though its parent did', async () => {
    await setup([{ when: { prompt: 'child task' }, reply: [{ text: 'done' }] }], { maxDepth: 1 })
    const systems = captureSystems()
    const root = await harness.agent()
    expect(harness.ctx.agents.systemPrompt(root)).toContain('# Delegating with `subagent`')
    const run = await harness.ctx.subagents.start('spawn', childTask(root, { maxDepth: 1 }))
    expect((await run.result).stopReason).toBe('completed')
    const child = systems.get(run.id)!
    expect(child).not.toContain('# Delegating with `subagent`')
    // The fork tool's requests carry the default bound (3), so depth 1 may still fork; the inherited bound of 1 forbids it.
    expect(child).not.toContain('# Delegating with `fork`')
  })

  it('the control tools add continuable-child guidance, which a child without send_message does not get', async () => {
    await setup(undefined)
    await harness.plugin(SubagentControlPlugin)
    const root = await harness.agent()
    const hidden = await harness.agent({ setup: (ctx, agent) => void ctx.tools.restrict(agent.id, { deny: ['send_message'] }) })
    const composed = harness.ctx.agents.composeSystemPrompt(root)
    expect(composed.parts.map((part) => part.name)).toEqual(['persona', 'environment', 'subagent:fork', 'subagent:subagent', 'subagent-control', 'tasks', 'bash'])
    expect(composed.text).toContain('follow-up work with send_message')
    expect(harness.ctx.agents.systemPrompt(hidden)).not.toContain('# Continuable subagents')
  })

  it('unloading a subagent tool removes its guidance', async () => {
    harness = await createHarness({ persona: 'P.' })
    await harness.plugin(SubagentService)
    await harness.plugin(SpawnPlugin, {})
    const fiber = harness.ctx.plugin(SubagentToolPlugin, { provider: 'spawn' })
    await fiber
    const root = await harness.agent()
    expect(harness.ctx.agents.systemPrompt(root)).toContain('# Delegating with `subagent`')
    await fiber.dispose()
    expect(harness.ctx.agents.systemPrompt(root)).not.toContain('Delegating')
  })
})
