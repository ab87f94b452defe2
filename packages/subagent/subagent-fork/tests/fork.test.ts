import { afterEach, describe, expect, it } from 'vitest'
import { createHarness, type Harness, type HarnessOptions } from '@dsh/testkit/harness'
import { text, textOf, type Message } from '@dsh/llm'
import type { Agent } from '@dsh/agent'
import { SubagentService, type SubagentRequest } from '@dsh/subagent'
import { SpawnPlugin } from '@dsh/subagent-spawn'
import { ForkPlugin } from '@dsh/subagent-fork'

let harness: Harness
let parent: Agent
afterEach(async () => {
  await harness?.dispose()
})

async function setup(script: HarnessOptions['script']) {
  harness = await createHarness({ script })
  await harness.plugin(SubagentService)
  await harness.plugin(SpawnPlugin, {})
  await harness.plugin(ForkPlugin, {})
  parent = await harness.agent()
}

const request = (prompt: string, extra: Partial<SubagentRequest> = {}): SubagentRequest => ({ prompt: [text(prompt)], parent, signal: new AbortController().signal, ...extra })

/** Record the messages each session's requests carried. */
function recordRequests(h: Harness): Map<string, Message[][]> {
  const seen = new Map<string, Message[][]>()
  const adapter = h.ctx.llm.getAdapter('scripted')!
  const stream = adapter.stream.bind(adapter)
  adapter.stream = (req) => {
    seen.set(req.origin.sessionId, [...(seen.get(req.origin.sessionId) ?? []), req.messages.toArray()])
    return stream(req)
  }
  return seen
}

const texts = (messages: Message[]) => messages.map((message) => textOf(message.content))

describe('fork: a child seeded with the parent\'s conversation up to its call', () => {
  it('inheritsParentContext is true for fork and false for spawn', async () => {
    await setup([{ reply: [{ text: 'x' }] }])
    expect(harness.ctx.subagents.getProvider('fork')!.inheritsParentContext).toBe(true)
    expect(harness.ctx.subagents.getProvider('spawn')!.inheritsParentContext).toBe(false)
  })

  it('a fork in the parent\'s first step sees the user\'s request; one in a later step also sees the earlier steps and their results', async () => {
    await setup([
      { when: { prompt: 'audit this repo' }, reply: [{ call: { tool: 'delegate', args: { n: 1 } } }, { call: { tool: 'lookup', args: {} } }, { call: { tool: 'delegate', args: { n: 2 } } }, { text: 'parent done' }] },
      { when: { prompt: 'forked task' }, reply: [{ text: 'fork answer' }] },
    ])
    const seen = recordRequests(harness)
    const forks: string[] = []
    harness.ctx.tools.register({ name: 'lookup', description: 'look something up', parameters: { type: 'object' }, execute: async () => 'the lookup result' })
    harness.ctx.tools.register({
      name: 'delegate',
      description: 'fork now',
      parameters: { type: 'object' },
      execute: async (_args, exec) => {
        const run = await harness.ctx.subagents.start('fork', { prompt: [text('forked task')], parent: exec.agent, signal: exec.signal })
        forks.push(run.id)
        const result = await run.result
        await run.dispose()
        return textOf(result.output)
      },
    })
    expect((await parent.followup('audit this repo')).reason).toBe('completed')
    expect(texts(seen.get(forks[0]!)![0]!)).toEqual(['audit this repo', 'forked task'])
    // The second fork sees the first step's call and result and the lookup's: every step whose calls have results.
    const second = seen.get(forks[1]!)![0]!
    expect(second.map((message) => message.role)).toEqual(['user', 'assistant', 'tool', 'assistant', 'tool', 'user'])
    expect(JSON.stringify(second)).toContain('the lookup result')
    expect(JSON.stringify(second)).toContain('fork answer')
    expect(textOf(second.at(-1)!.content)).toBe('forked task')
  })

  it('sees the completed turns and the in-flight turn up to the pending call: the user\'s message, then its own prompt', async () => {
    await setup([
      { when: { prompt: 'first question' }, reply: [{ text: 'first answer' }, { call: { tool: 'delegate', args: {} } }, { text: 'parent done' }] },
      { when: { prompt: 'forked task' }, reply: [{ text: 'fork answer' }] },
    ])
    const seen = recordRequests(harness)
    let forkRun: Awaited<ReturnType<typeof harness.ctx.subagents.start>> | undefined
    let seedLength = -1
    harness.ctx.tools.register({
      name: 'delegate',
      description: 'fork now',
      parameters: { type: 'object' },
      execute: async (_args, exec) => {
        forkRun = await harness.ctx.subagents.start('fork', { prompt: [text('forked task')], parent: exec.agent, signal: exec.signal })
        seedLength = harness.ctx.agents.get(forkRun.id)!.session.seedLength
        const result = await forkRun.result
        await forkRun.dispose()
        return textOf(result.output)
      },
    })
    await parent.followup('first question')
    await parent.followup('second question')
    // Cut just before the response that made the delegating call.
    const pendingCall = parent.session.events().findLast((event) => event.type === 'assistant/message' && event.message.content.some((block) => block.type === 'tool-call'))!
    expect(seedLength).toBe(pendingCall.seq)
    const childRequests = seen.get(forkRun!.id)!
    expect(texts(childRequests[0])).toEqual(['first question', 'first answer', 'second question', 'forked task'])
    expect(texts(parent.session.messages().toArray())).toContain('second question')
    const results = parent.session.events().flatMap((event) => (event.type === 'tool/result' ? [textOf(event.result.content)] : []))
    expect(results).toEqual(['fork answer'])
  })

  it('records seedLength in the header and reads its result only after the seed', async () => {
    await setup([
      { when: { prompt: 'history' }, reply: [{ text: 'seeded parent text' }] },
      { when: { prompt: 'quiet task' }, reply: [{ error: 'the fork failed at once' }] },
    ])
    await parent.followup('history')
    const run = await harness.ctx.subagents.start('fork', request('quiet task'))
    const child = harness.ctx.agents.get(run.id)!
    expect(child.session.header.seedLength).toBe(parent.session.completedLength)
    const result = await run.result
    expect(result.stopReason).toBe('error')
    expect(result.output).toEqual([])
    await run.dispose()
  })

  it('with no completed turn, fork behaves like spawn', async () => {
    await setup([{ when: { prompt: 'task' }, reply: [{ text: 'same answer' }] }])
    const seen = recordRequests(harness)
    const forked = await harness.ctx.subagents.start('fork', request('task'))
    const spawned = await harness.ctx.subagents.start('spawn', request('task'))
    const [forkResult, spawnResult] = await Promise.all([forked.result, spawned.result])
    expect(forkResult).toEqual(spawnResult)
    expect(harness.ctx.agents.get(forked.id)!.session.seedLength).toBe(0)
    expect(harness.ctx.agents.get(forked.id)!.session.header.seedLength).toBeUndefined()
    expect(seen.get(forked.id)).toEqual(seen.get(spawned.id))
    const types = (id: string) => harness.ctx.agents.get(id)!.session.events().map((event) => event.type)
    expect(types(forked.id)).toEqual(types(spawned.id))
    await forked.dispose()
    await spawned.dispose()
  })

  it('shares the parent prefix instead of copying it', async () => {
    await setup([{ when: { prompt: 'p' }, reply: [{ text: 'a' }] }, { when: { prompt: 'child' }, reply: [{ text: 'c' }] }])
    await parent.followup('p')
    const run = await harness.ctx.subagents.start('fork', request('child'))
    const child = harness.ctx.agents.get(run.id)!
    for (let seq = 0; seq < child.session.seedLength; seq++) expect(child.session.at(seq)).toBe(parent.session.at(seq))
    await run.result
    await run.dispose()
    expect(parent.session.length).toBe(parent.session.completedLength)
  })

  it('the provider name comes from config', async () => {
    await setup([{ reply: [{ text: 'x' }] }])
    await harness.plugin(ForkPlugin, { providerName: 'branch' })
    expect(harness.ctx.subagents.getProvider('branch')!.inheritsParentContext).toBe(true)
  })
})
