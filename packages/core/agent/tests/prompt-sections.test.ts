import { afterEach, describe, expect, it } from 'vitest'
import { mkdtempSync, mkdirSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createHarness, type Harness } from '@dsh/testkit/harness'
import type { Context } from 'cordis'
import { maskEnvironmentFacts } from '@dsh/agent'

let harness: Harness
afterEach(async () => {
  await harness?.dispose()
})

/** Capture every system prompt the model is sent, in order. */
function captureSystems(): string[] {
  const systems: string[] = []
  const adapter = harness.ctx.llm.getAdapter('scripted')!
  const stream = adapter.stream.bind(adapter)
  adapter.stream = (request) => {
    systems.push(request.system)
    return stream(request)
  }
  return systems
}

describe('system prompt sections', () => {
  it('composes the persona then the environment: cwd, session date, platform, git or not', async () => {
    harness = await createHarness({ persona: 'You are the test persona.' })
    const plain = mkdtempSync(join(tmpdir(), 'dsh-prompt-'))
    const repo = mkdtempSync(join(tmpdir(), 'dsh-prompt-git-'))
    mkdirSync(join(repo, '.git'))
    const outside = await harness.agent({ meta: { cwd: plain } })
    const inside = await harness.agent({ meta: { cwd: join(repo) } })
    const text = harness.ctx.agents.systemPrompt(outside)
    expect(text.startsWith('You are the test persona.\n\n# Environment\n')).toBe(true)
    expect(text).toContain(`- Working directory: ${plain}`)
    expect(text).toContain(`- Date: ${outside.session.header.createdAt.slice(0, 10)}`)
    expect(text).toContain(`- Platform: ${process.platform}`)
    expect(text).toContain('- Git repository: no')
    expect(harness.ctx.agents.systemPrompt(inside)).toContain('- Git repository: yes')
  })

  it('renders plugin sections in order, and drops a section when its plugin unloads', async () => {
    harness = await createHarness({ persona: 'P.' })
    const fiber = harness.ctx.plugin({
      name: 'guidance',
      inject: ['agents'],
      apply(ctx: Context) {
        ctx.agents.addPromptSection({ name: 'late', order: 300, render: () => 'LATE' })
        ctx.agents.addPromptSection({ name: 'early', order: 100, render: () => 'EARLY' })
      },
    })
    await fiber
    const agent = await harness.agent()
    const composed = harness.ctx.agents.composeSystemPrompt(agent)
    expect(composed.parts.map((part) => part.name)).toEqual(['persona', 'environment', 'early', 'late'])
    expect(composed.text.endsWith('EARLY\n\nLATE')).toBe(true)
    await fiber.dispose()
    expect(harness.ctx.agents.composeSystemPrompt(agent).parts.map((part) => part.name)).toEqual(['persona', 'environment'])
  })

  it('leaves out the section of a tool the agent cannot see', async () => {
    harness = await createHarness()
    harness.ctx.tools.register({ name: 'delegate', description: 'd', parameters: { type: 'object' }, execute: () => 'x' })
    harness.ctx.tools.register({ name: 'other', description: 'o', parameters: { type: 'object' }, execute: () => 'x' })
    harness.ctx.agents.addPromptSection({ name: 'delegation', order: 100, tool: 'delegate', render: () => 'DELEGATE WISELY' })
    harness.ctx.agents.addPromptSection({ name: 'hidden-by-predicate', order: 110, visible: () => false, render: () => 'NEVER' })
    const sees = await harness.agent()
    const filtered = await harness.agent({ setup: (ctx, agent) => void ctx.tools.restrict(agent.id, { deny: ['delegate'] }) })
    expect(harness.ctx.agents.systemPrompt(sees)).toContain('DELEGATE WISELY')
    expect(harness.ctx.agents.systemPrompt(filtered)).not.toContain('DELEGATE WISELY')
    expect(harness.ctx.agents.systemPrompt(sees)).not.toContain('NEVER')
  })

  it('a section that throws is left out and the turn still runs with the rest', async () => {
    harness = await createHarness({ persona: 'P.', script: [{ reply: [{ text: 'fine' }] }] })
    harness.ctx.agents.addPromptSection({ name: 'broken', order: 100, render: () => { throw new Error('render exploded') } })
    harness.ctx.agents.addPromptSection({ name: 'after', order: 200, render: () => 'AFTER' })
    const systems = captureSystems()
    const agent = await harness.agent()
    const result = await agent.followup('hi')
    expect(result.reason).toBe('completed')
    expect(systems[0]).toContain('AFTER')
    expect(harness.ctx.agents.composeSystemPrompt(agent).failures).toEqual([{ name: 'broken', error: 'render exploded' }])
  })

  it('keeps the system prompt byte for byte the same across turns', async () => {
    harness = await createHarness({ script: [{ reply: [{ text: 'one' }, { text: 'two' }, { text: 'three' }] }] })
    let renders = 0
    harness.ctx.agents.addPromptSection({ name: 'counted', order: 100, render: () => `rendered ${++renders}` })
    const systems = captureSystems()
    const agent = await harness.agent()
    await agent.followup('a')
    await agent.followup('b')
    await agent.followup('c')
    expect(systems).toHaveLength(3)
    expect(new Set(systems).size).toBe(1)
    expect(renders).toBe(1)
  })

  it('refuses a second section with the same name, naming it', async () => {
    harness = await createHarness()
    harness.ctx.agents.addPromptSection({ name: 'twice', order: 100, render: () => 'a' })
    expect(() => harness.ctx.agents.addPromptSection({ name: 'twice', order: 100, render: () => 'b' })).toThrow(/"twice" is already registered/)
    expect(() => harness.ctx.agents.addPromptSection({ name: '', order: 1, render: () => 'c' })).toThrow(/non-empty name/)
  })
})

describe('maskEnvironmentFacts', () => {
  it('replaces where and when with placeholders and keeps everything else, so a recording replays elsewhere and later', () => {
    const text = ['You are dsh.', '# Environment', '- Working directory: /tmp/x y', '- Date: 2026-11-30', '- Platform: linux', '- Git repository: yes', '# Delegation'].join('\n')
    expect(maskEnvironmentFacts(text)).toBe(['You are dsh.', '# Environment', '- Working directory: <working-directory>', '- Date: <date>', '- Platform: linux', '- Git repository: <git-repository>', '# Delegation'].join('\n'))
  })
})
