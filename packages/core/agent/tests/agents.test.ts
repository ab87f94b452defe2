import { afterEach, describe, expect, it } from 'vitest'
import { createHarness, type Harness } from '@dsh/testkit/harness'

let harness: Harness
afterEach(async () => {
  await harness?.dispose()
})

describe('ctx.agents', () => {
  it('creates an agent whose id is its session id, lists it, and forgets it once disposed', async () => {
    harness = await createHarness()
    const agent = await harness.agent({ meta: { cwd: '/tmp', origin: 'test' } })
    expect(agent.id).toBe(agent.session.id)
    expect(agent.session.header).toMatchObject({ cwd: '/tmp', origin: 'test' })
    expect(harness.ctx.agents.get(agent.id)).toBe(agent)
    expect(harness.ctx.agents.list()).toEqual([agent])
    await agent.dispose()
    await agent.dispose()
    expect(agent.status).toBe('disposed')
    expect(harness.ctx.agents.get(agent.id)).toBeUndefined()
    expect(harness.ctx.sessions.get(agent.id)).toBeUndefined()
  })

  it('runs setup before the agent is visible, and rolls everything back when setup fails', async () => {
    harness = await createHarness()
    let visibleDuringSetup: unknown = 'unset'
    await expect(
      harness.agent({
        setup: (ctx, agent) => {
          visibleDuringSetup = harness.ctx.agents.get(agent.id)
          ctx.tools.register({ name: 'scoped', description: 's', parameters: { type: 'object' }, execute: () => 'x' })
          throw new Error('setup exploded')
        },
      }),
    ).rejects.toThrow('setup exploded')
    expect(visibleDuringSetup).toBeUndefined()
    expect(harness.ctx.agents.list()).toEqual([])
    expect(harness.ctx.sessions.list()).toEqual([])
  })

  it('an aborted signal rejects creation and leaves no agent or session', async () => {
    harness = await createHarness()
    const controller = new AbortController()
    controller.abort()
    await expect(harness.agent({ signal: controller.signal })).rejects.toMatchObject({ code: 'ABORTED' })
    const later = new AbortController()
    await expect(harness.agent({ signal: later.signal, setup: () => later.abort() })).rejects.toMatchObject({ code: 'ABORTED' })
    expect(harness.ctx.agents.list()).toEqual([])
    expect(harness.ctx.sessions.list()).toEqual([])
  })

  it('a tool registered on an agent\'s own context exists only for that agent and goes with it', async () => {
    harness = await createHarness()
    const a = await harness.agent({
      setup: (ctx) => {
        ctx.tools.register({ name: 'mine', description: 'only for a', parameters: { type: 'object' }, execute: () => 'a' })
      },
    })
    const b = await harness.agent()
    expect(harness.ctx.tools.list(a.id)).toContain('mine')
    expect(harness.ctx.tools.list(b.id)).not.toContain('mine')
    expect(harness.ctx.tools.list()).not.toContain('mine')
    await a.dispose()
    expect(harness.ctx.tools.list(a.id)).not.toContain('mine')
  })

  it('disposal awaits every registered cleanup before the session is released', async () => {
    harness = await createHarness()
    const order: string[] = []
    harness.ctx.agents.onCleanup(async (agent) => {
      order.push(`cleanup start, session live: ${harness.ctx.sessions.get(agent.id) !== undefined}`)
      await new Promise((resolve) => setTimeout(resolve, 30))
      order.push('cleanup end')
    })
    const agent = await harness.agent()
    await agent.dispose()
    order.push('disposed')
    expect(order).toEqual(['cleanup start, session live: true', 'cleanup end', 'disposed'])
    expect(agent.session.released).toBe(true)
  })

  it('disposing a running agent aborts its turn and rejects queued turns', async () => {
    harness = await createHarness({ script: [{ reply: [{ text: 'slow', delay_ms: 60_000 }, { text: 'never' }] }] })
    const agent = await harness.agent()
    const first = agent.followup('one')
    const second = agent.followup('two')
    await new Promise((resolve) => setTimeout(resolve, 10))
    await agent.dispose()
    expect((await first).reason).toBe('aborted')
    await expect(second).rejects.toThrow(/disposed before this turn started/)
    expect(() => agent.followup('three')).toThrow(/disposed/)
  })
})
