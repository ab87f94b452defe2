import { afterEach, describe, expect, it } from 'vitest'
import { createHarness, type Harness } from '@dsh/testkit/harness'
import { AgentRegistry } from '@dsh/agent'

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

  it('an agent knows its root and its ancestors, nearest first; a root is its own root and has none', async () => {
    harness = await createHarness()
    const root = await harness.agent()
    const child = await harness.agent({ parent: root })
    const grandchild = await harness.agent({ parent: child })
    expect(root.root).toBe(root)
    expect([...root.ancestors()]).toEqual([])
    expect(child.root).toBe(root)
    expect(grandchild.root).toBe(root)
    expect([...grandchild.ancestors()].map((agent) => agent.id)).toEqual([child.id, root.id])
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

  it('cleanups run one at a time in order, a synchronous one after an earlier one has settled', async () => {
    harness = await createHarness()
    const order: string[] = []
    harness.ctx.agents.onCleanup(() => {
      order.push('first (synchronous)')
    })
    let releaseSecond!: () => void
    harness.ctx.agents.onCleanup(async () => {
      order.push('second start')
      await new Promise<void>((resolve) => (releaseSecond = resolve))
      order.push('second end')
    })
    harness.ctx.agents.onCleanup(() => {
      order.push('third (synchronous)')
    })
    const agent = await harness.agent()
    const disposed = agent.dispose()
    await new Promise((resolve) => setImmediate(resolve))
    expect(order).toEqual(['first (synchronous)', 'second start'])
    expect(agent.session.released).toBe(false)
    releaseSecond()
    await disposed
    expect(order).toEqual(['first (synchronous)', 'second start', 'second end', 'third (synchronous)'])
    expect(agent.session.released).toBe(true)
    expect(harness.ctx.agents.get(agent.id)).toBeUndefined()
  })

  it('a cleanup that throws still lets the agent be disposed, and its dispose rejects with that error', async () => {
    harness = await createHarness()
    harness.ctx.agents.onCleanup(() => {
      throw new Error('cleanup broke')
    })
    const agent = await harness.agent()
    await expect(agent.dispose()).rejects.toThrow('cleanup broke')
    expect(agent.status).toBe('disposed')
    expect(agent.session.released).toBe(true)
    expect(harness.ctx.agents.get(agent.id)).toBeUndefined()
  })

  it('every failing cleanup is reported: two failures reject with both in an AggregateError', async () => {
    harness = await createHarness()
    harness.ctx.agents.onCleanup(() => {
      throw new Error('first broke')
    })
    harness.ctx.agents.onCleanup(async () => {
      throw new Error('second broke')
    })
    const agent = await harness.agent()
    const failure = await agent.dispose().then(
      () => undefined,
      (error: unknown) => error,
    )
    expect(failure).toBeInstanceOf(AggregateError)
    expect((failure as AggregateError).errors.map((error: Error) => error.message)).toEqual(['first broke', 'second broke'])
    expect(agent.session.released).toBe(true)
  })

  it('a session observer that fails its release makes the dispose reject, after the session is released', async () => {
    harness = await createHarness()
    harness.ctx.sessions.addObserver({
      released: () => {
        throw new Error('flush failed')
      },
    })
    const agent = await harness.agent()
    await expect(agent.dispose()).rejects.toThrow('flush failed')
    expect(agent.session.released).toBe(true)
    expect(agent.status).toBe('disposed')
  })

  it('a session observer that throws as a fresh agent is announced rejects the creation and rolls the agent back', async () => {
    harness = await createHarness()
    let created: string | undefined
    harness.ctx.sessions.addObserver({
      created: (session) => {
        created = session.id
        throw new Error('cannot persist')
      },
    })
    await expect(harness.ctx.agents.create()).rejects.toThrow('cannot persist')
    expect(created).toBeDefined()
    expect(harness.ctx.agents.list()).toEqual([])
    expect(harness.ctx.sessions.get(created!)).toBeUndefined()
  })

  it('an aborted signal refuses the creation with a rejection, not a throw, and creates nothing', async () => {
    harness = await createHarness()
    const controller = new AbortController()
    controller.abort()
    const creating = harness.ctx.agents.create({ signal: controller.signal })
    await expect(creating).rejects.toThrow(/aborted before the agent was created/)
    expect(harness.ctx.agents.list()).toEqual([])
    expect(harness.ctx.sessions.list()).toEqual([])
  })

  it('disposing a running agent aborts its turn and rejects queued turns', async () => {
    harness = await createHarness({ script: [{ reply: [{ text: 'slow', delay_ms: 60_000 }, { text: 'never' }] }] })
    const agent = await harness.agent()
    const asked = new Promise<void>((resolve) => agent.session.subscribe((update) => update.type === 'user/message' && resolve(), { chunks: false }))
    const first = agent.followup('one')
    const second = agent.followup('two')
    await asked
    await agent.dispose()
    expect((await first).reason).toBe('aborted')
    await expect(second).rejects.toThrow(/disposed before this turn started/)
    expect(() => agent.followup('three')).toThrow(/disposed/)
  })
})

describe('ctx.agents: lifecycle edges', () => {
  it('cancel before the queued turn starts aborts that turn instead of being lost', async () => {
    harness = await createHarness({ script: [{ reply: [{ text: 'should not run' }] }] })
    const agent = await harness.agent()
    const turn = agent.followup('hi')
    agent.cancel()
    expect((await turn).reason).toBe('aborted')
    expect(agent.session.events().some((event) => event.type === 'assistant/message')).toBe(false)
  })

  it('cancel on an idle agent does not cancel a later turn', async () => {
    harness = await createHarness({ script: [{ reply: [{ text: 'ran' }] }] })
    const agent = await harness.agent()
    agent.cancel()
    expect((await agent.followup('hi')).reason).toBe('completed')
  })

  it('unloading the registry disposes its live agents and releases their sessions', async () => {
    harness = await createHarness({ script: [{ reply: [{ text: 'slow', delay_ms: 60_000 }] }] })
    const agent = await harness.agent()
    const asked = new Promise<void>((resolve) => agent.session.subscribe((update) => update.type === 'user/message' && resolve(), { chunks: false }))
    const turn = agent.followup('hi')
    await asked
    await harness.ctx.registry.delete(AgentRegistry)
    expect((await turn).reason).toBe('aborted')
    // Disposal finishes after the turn's end: wait for it (the test's timeout bounds the wait).
    while (agent.status !== 'disposed') await new Promise((resolve) => setTimeout(resolve, 10))
    expect(agent.status).toBe('disposed')
    expect(agent.session.released).toBe(true)
  })

  it('resuming a session interrupted mid-tool closes the open turn so the history stays valid', async () => {
    // The logged tool-calling answer was the rule's first reply: a resumed session continues after it.
    harness = await createHarness({ script: [{ reply: [{ text: 'the logged call' }, { text: 'carrying on: {{last_tool_result}}' }] }] })
    const session = harness.ctx.sessions.create({ origin: 'test' })
    const call = { type: 'tool-call' as const, id: 'call_9', name: 'bash', args: { command: 'make' } }
    session.append({ type: 'turn/start', turn: 1 })
    session.append({ type: 'step/start', step: 1 })
    session.append({ type: 'user/message', message: { role: 'user', content: [{ type: 'text', text: 'build it' }] } })
    session.append({ type: 'assistant/message', message: { role: 'assistant', content: [call] } })
    session.append({ type: 'tool/call', call })
    const agent = await harness.agent({ sessionId: session.id })
    expect(agent.session.events().slice(-3)).toMatchObject([
      { type: 'tool/result', result: { callId: 'call_9', isError: true } },
      { type: 'step/end', step: 1 },
      { type: 'turn/end', turn: 1, reason: 'error', error: expect.stringContaining('interrupted') },
    ])
    const result = await agent.followup('go on')
    expect(result).toMatchObject({ reason: 'completed', turn: 2 })
    const last = agent.session.at(agent.session.length - 3)
    expect(last?.type === 'assistant/message' && last.message.content[0].type === 'text' && last.message.content[0].text).toMatch(/carrying on: bash never returned: interrupted/)
  })
})
