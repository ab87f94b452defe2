import { afterEach, describe, expect, it } from 'vitest'
import { createHarness, gateTool, type Harness } from '@dsh/testkit/harness'
import { textOf, userText } from '@dsh/llm'
import type { Agent, AgentStatus, InputBoundary } from '@dsh/agent'

let harness: Harness
afterEach(async () => {
  await harness?.dispose()
})

function userTexts(agent: Agent): string[] {
  return agent.session.events().flatMap((event) => (event.type === 'user/message' ? [textOf(event.message.content)] : []))
}

function turnCount(agent: Agent): number {
  return agent.session.events().filter((event) => event.type === 'turn/start').length
}

describe('agent state', () => {
  it('reads idle before turn/end listeners run', async () => {
    harness = await createHarness({ script: [{ reply: [{ text: 'done' }] }] })
    const agent = await harness.agent()
    const seen: AgentStatus[] = []
    agent.session.subscribe((update) => {
      if (update.type === 'turn/end') seen.push(agent.status)
    })
    await agent.followup('go')
    expect(seen).toEqual(['idle'])
  })

  it('a followup queued from a turn/end listener runs as the next turn', async () => {
    harness = await createHarness({ script: [{ reply: [{ text: 'first' }, { text: 'second' }] }] })
    const agent = await harness.agent()
    let second: Promise<unknown> | undefined
    agent.session.subscribe((update) => {
      if (update.type === 'turn/end' && update.turn === 1) second = agent.followup('again')
    })
    await agent.followup('go')
    await expect(second).resolves.toMatchObject({ turn: 2, reason: 'completed' })
  })

  it('a disposed agent refuses input with AgentError DISPOSED', async () => {
    harness = await createHarness()
    const agent = await harness.agent()
    await agent.dispose()
    expect(() => agent.steer('x')).toThrow(expect.objectContaining({ name: 'AgentError', code: 'DISPOSED' }))
    expect(() => agent.followup('x')).toThrow(expect.objectContaining({ code: 'DISPOSED' }))
  })
})

describe('input sources', () => {
  it('are polled at every step boundary, and their input joins that step', async () => {
    harness = await createHarness({ script: [{ reply: [{ call: { tool: 'gate' } }, { text: 'done' }] }] })
    const gate = gateTool(harness)
    const agent = await harness.agent()
    const polls: InputBoundary[] = []
    let pending: string | undefined
    agent.addInputSource((boundary) => {
      polls.push(boundary)
      const message = pending
      pending = undefined
      return message === undefined ? [] : [userText(message)]
    })
    const turn = agent.followup('go')
    await gate.entered
    pending = 'from the source'
    gate.release()
    await turn
    expect(userTexts(agent)).toEqual(['go', 'from the source'])
    // Two step boundaries, then one chance to start a new turn once the turn completed.
    expect(polls).toEqual(['step', 'step', 'wake'])
    expect(turnCount(agent)).toBe(1)
  })

  it('wake on an idle agent starts a turn only when a source has input', async () => {
    harness = await createHarness({ script: [{ reply: [{ text: 'answered the source' }] }] })
    const agent = await harness.agent()
    let pending: string | undefined
    agent.addInputSource(() => {
      const message = pending
      pending = undefined
      return message === undefined ? [] : [userText(message)]
    })
    agent.wake()
    await agent.whenIdle()
    expect(turnCount(agent)).toBe(0)
    pending = 'news'
    agent.wake()
    await agent.whenIdle()
    expect(turnCount(agent)).toBe(1)
    expect(userTexts(agent)).toEqual(['news'])
  })

  it('are not polled for a new turn after an aborted turn', async () => {
    harness = await createHarness({ script: [{ reply: [{ call: { tool: 'gate' } }, { text: 'never' }] }] })
    const gate = gateTool(harness)
    const agent = await harness.agent()
    const polls: InputBoundary[] = []
    agent.addInputSource((boundary) => {
      polls.push(boundary)
      return []
    })
    const turn = agent.followup('go')
    await gate.entered
    agent.cancel()
    gate.release()
    expect((await turn).reason).toBe('aborted')
    await agent.whenIdle()
    expect(polls).toEqual(['step'])
  })

  it('a source that throws gives nothing and the turn goes on; its disposer removes it', async () => {
    harness = await createHarness({ script: [{ reply: [{ text: 'one' }, { text: 'two' }] }] })
    const agent = await harness.agent()
    let calls = 0
    const remove = agent.addInputSource(() => {
      calls++
      throw new Error('broken source')
    })
    expect(await agent.followup('go')).toMatchObject({ reason: 'completed' })
    const callsBefore = calls
    expect(callsBefore).toBeGreaterThan(0)
    remove()
    await agent.followup('again')
    expect(calls).toBe(callsBefore)
  })
})
