import { afterEach, describe, expect, it } from 'vitest'
import { createHarness, eventTypes, type Harness } from '@dsh/testkit/harness'
import { textOf } from '@dsh/llm'

let harness: Harness
afterEach(async () => {
  await harness?.dispose()
})

describe('the turn flow', () => {
  it('logs a plain answer as turn/start, step/start, user/message, assistant/message, step/end, turn/end', async () => {
    harness = await createHarness({ script: [{ when: { prompt: 'hello' }, reply: [{ text: 'hi there, friend' }] }] })
    const agent = await harness.agent()
    const result = await agent.followup('hello')
    expect(result.reason).toBe('completed')
    expect(eventTypes(agent)).toEqual(['turn/start', 'step/start', 'user/message', 'assistant/message', 'step/end', 'turn/end'])
    const events = agent.session.events()
    expect(events.map((event) => event.seq)).toEqual([0, 1, 2, 3, 4, 5])
    const answer = events[3]
    expect(answer.type === 'assistant/message' && textOf(answer.message.content)).toBe('hi there, friend')
  })

  it('streams the answer as live chunks that are not logged', async () => {
    harness = await createHarness({ script: [{ reply: [{ text: 'one two three four five six seven eight nine ten eleven twelve' }] }] })
    const agent = await harness.agent()
    const chunks: string[] = []
    agent.session.subscribe((update) => {
      if (update.type === 'assistant/chunk') chunks.push(update.text)
    })
    await agent.followup('go')
    expect(chunks.length).toBeGreaterThan(1)
    expect(chunks.join('')).toBe('one two three four five six seven eight nine ten eleven twelve')
    expect(eventTypes(agent)).not.toContain('assistant/chunk')
  })

  it('round-trips a tool call: the result is logged and fed to the next request', async () => {
    harness = await createHarness({
      script: [{ reply: [{ call: { tool: 'echo', args: { value: 'ping' } } }, { text: 'the tool said {{last_tool_result}}' }] }],
    })
    harness.ctx.tools.register({
      name: 'echo',
      description: 'echo a value',
      parameters: { type: 'object', properties: { value: { type: 'string' } }, required: ['value'] },
      execute: (args) => `echo:${(args as { value: string }).value}`,
    })
    const agent = await harness.agent()
    const result = await agent.followup('use the tool')
    expect(result.reason).toBe('completed')
    expect(eventTypes(agent)).toEqual([
      'turn/start', 'step/start', 'user/message', 'assistant/message', 'tool/call', 'tool/result', 'step/end',
      'step/start', 'assistant/message', 'step/end', 'turn/end',
    ])
    const last = agent.session.at(8)!
    expect(last.type === 'assistant/message' && textOf(last.message.content)).toBe('the tool said echo:ping')
  })

  it('a model error ends the turn with reason error and the provider message', async () => {
    harness = await createHarness({ script: [{ reply: [{ error: 'rate limited (429)' }] }] })
    const agent = await harness.agent()
    const result = await agent.followup('hi')
    expect(result).toMatchObject({ reason: 'error', error: expect.stringContaining('rate limited (429)') })
    const end = agent.session.at(agent.session.length - 1)!
    expect(end).toMatchObject({ type: 'turn/end', reason: 'error' })
    expect(eventTypes(agent)).toEqual(['turn/start', 'step/start', 'user/message', 'step/end', 'turn/end'])
  })

  it('a script with no reply for the session ends the turn error naming the session and prompt', async () => {
    harness = await createHarness({ script: [{ when: { prompt: '^never$' }, reply: [{ text: 'x' }] }] })
    const agent = await harness.agent()
    const result = await agent.followup('something else')
    expect(result.reason).toBe('error')
    expect(result.error).toContain(agent.id)
    expect(result.error).toContain('something else')
  })

  it('heads the system prompt with the deployment persona, or a per-agent persona', async () => {
    harness = await createHarness({ persona: 'You are the test persona.', script: [{ reply: [{ text: 'ok' }, { text: 'ok' }] }] })
    const systems: string[] = []
    const adapter = harness.ctx.llm.getAdapter('scripted')!
    const original = adapter.stream.bind(adapter)
    harness.ctx.llm.getAdapter('scripted')!.stream = (request) => {
      systems.push(request.system)
      return original(request)
    }
    await (await harness.agent()).followup('a')
    await (await harness.agent({ agentOptions: { persona: 'You are a reviewer.' } })).followup('b')
    expect(systems.map((system) => system.split('\n\n')[0])).toEqual(['You are the test persona.', 'You are a reviewer.'])
  })
})

describe('turn queue', () => {
  it('a followup queued right after the previous turn resolves still runs', async () => {
    harness = await createHarness({ script: [{ reply: [{ text: 'one' }, { text: 'two' }, { text: 'three' }] }] })
    const agent = await harness.agent()
    expect((await agent.followup('a')).reason).toBe('completed')
    expect((await agent.followup('b')).reason).toBe('completed')
    expect((await agent.followup('c')).turn).toBe(3)
  })
})
