import { afterEach, describe, expect, it } from 'vitest'
import { createHarness, gateTool, eventTypes, type Harness } from '@dsh/testkit/harness'
import type { SessionEvent } from '@dsh/session'

let harness: Harness
afterEach(async () => {
  await harness?.dispose()
})

const results = (events: SessionEvent[]) =>
  events.flatMap((event) => (event.type === 'tool/result' ? [{ name: event.result.name, text: event.result.content[0]?.text, isError: event.result.isError === true }] : []))

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(resolve, ms)
    signal?.addEventListener('abort', () => {
      clearTimeout(timer)
      reject(new Error('sleep aborted'))
    }, { once: true })
  })
}

describe('tool calls in the loop', () => {
  it('runs concurrency-safe calls of one message in parallel and logs results in model order', async () => {
    harness = await createHarness({
      script: [{ reply: [{ calls: [{ tool: 'wait', args: { ms: 80, tag: 'slow' } }, { tool: 'wait', args: { ms: 5, tag: 'fast' } }] }, { text: 'done' }] }],
    })
    const finished: string[] = []
    let running = 0
    let maxRunning = 0
    harness.ctx.tools.register({
      name: 'wait',
      description: 'wait a while',
      concurrencySafe: true,
      parameters: { type: 'object', properties: { ms: { type: 'number' }, tag: { type: 'string' } }, required: ['ms', 'tag'] },
      execute: async (args, exec) => {
        const { ms, tag } = args as { ms: number; tag: string }
        running++
        maxRunning = Math.max(maxRunning, running)
        await sleep(ms, exec.signal)
        running--
        finished.push(tag)
        return tag
      },
    })
    const agent = await harness.agent()
    await agent.followup('go')
    expect(maxRunning).toBe(2)
    expect(finished).toEqual(['fast', 'slow'])
    expect(results(agent.session.events()).map((result) => result.text)).toEqual(['slow', 'fast'])
  })

  it('returns invalid tool arguments to the model as an error result instead of running the tool', async () => {
    harness = await createHarness({ script: [{ reply: [{ call: { tool: 'add', args: { a: 'one' } } }, { text: 'I see: {{last_tool_result}}' }] }] })
    let ran = false
    harness.ctx.tools.register({
      name: 'add',
      description: 'add numbers',
      parameters: { type: 'object', properties: { a: { type: 'number' }, b: { type: 'number' } }, required: ['a', 'b'] },
      execute: () => {
        ran = true
        return 'x'
      },
    })
    const agent = await harness.agent()
    const turn = await agent.followup('add')
    expect(turn.reason).toBe('completed')
    expect(ran).toBe(false)
    const [result] = results(agent.session.events())
    expect(result.isError).toBe(true)
    expect(result.text).toMatch(/invalid arguments for add: .*\/a must be number/)
    expect(result.text).toMatch(/must have required property 'b'/)
  })

  it('turns a thrown tool error and an unknown tool into error results', async () => {
    harness = await createHarness({ script: [{ reply: [{ calls: [{ tool: 'boom', args: {} }, { tool: 'nope', args: {} }] }, { text: 'ok' }] }] })
    harness.ctx.tools.register({ name: 'boom', description: 'fails', parameters: { type: 'object' }, execute: () => { throw new Error('disk on fire') } })
    const agent = await harness.agent()
    expect((await agent.followup('x')).reason).toBe('completed')
    expect(results(agent.session.events())).toEqual([
      { name: 'boom', text: 'boom failed: disk on fire', isError: true },
      { name: 'nope', text: expect.stringContaining('unknown tool "nope"'), isError: true },
    ])
  })
})

describe('cancel and steer', () => {
  it('cancel mid-step ends the turn aborted, aborts the running tool and logs its result', async () => {
    harness = await createHarness({ script: [{ reply: [{ call: { tool: 'hang', args: {} } }, { text: 'never' }] }] })
    let toolAborted = false
    let entered!: () => void
    const inTool = new Promise<void>((resolve) => (entered = resolve))
    harness.ctx.tools.register({
      name: 'hang',
      description: 'hangs until aborted',
      parameters: { type: 'object' },
      execute: async (_args, exec) => {
        entered()
        await sleep(60_000, exec.signal).catch(() => {
          toolAborted = true
        })
        return 'late'
      },
    })
    const agent = await harness.agent()
    const turn = agent.followup('go')
    await inTool
    agent.cancel()
    const result = await turn
    expect(result.reason).toBe('aborted')
    expect(toolAborted).toBe(true)
    expect(agent.status).toBe('idle')
    const types = eventTypes(agent)
    expect(types.slice(-4)).toEqual(['tool/call', 'tool/result', 'step/end', 'turn/end'])
    await agent.whenIdle()
  })

  it('cancel while the model streams keeps the partial text and ends aborted', async () => {
    harness = await createHarness({ script: [{ reply: [{ text: 'partial', delay_ms: 60_000 }] }] })
    const agent = await harness.agent()
    // The model is asked once the step's input is logged: cancel then, while its answer is awaited.
    const asked = new Promise<void>((resolve) => agent.session.subscribe((update) => update.type === 'user/message' && resolve(), { chunks: false }))
    const turn = agent.followup('go')
    await asked
    agent.cancel()
    expect((await turn).reason).toBe('aborted')
    expect(eventTypes(agent).at(-1)).toBe('turn/end')
  })

  it('a steered message lands in the next step of the running turn', async () => {
    harness = await createHarness({
      script: [{ reply: [{ call: { tool: 'gate', args: {} } }, { text: 'saw the steer' }] }],
    })
    const gate = gateTool(harness)
    const agent = await harness.agent()
    const turn = agent.followup('start')
    await gate.entered
    agent.steer('also consider this')
    gate.release()
    expect((await turn).reason).toBe('completed')
    const events = agent.session.events()
    const steered = events.findIndex((event) => event.type === 'user/message' && event.message.content[0].type === 'text' && event.message.content[0].text === 'also consider this')
    const secondStep = events.findIndex((event) => event.type === 'step/start' && event.step === 2)
    expect(steered).toBe(secondStep + 1)
    expect(events.filter((event) => event.type === 'turn/start')).toHaveLength(1)
  })

  it('steer wakes an idle agent with a new turn; inject does not', async () => {
    harness = await createHarness({ script: [{ reply: [{ text: 'first' }, { text: 'second' }] }] })
    const agent = await harness.agent()
    await agent.followup('one')
    agent.inject('quietly')
    await new Promise((resolve) => setTimeout(resolve, 10))
    expect(agent.status).toBe('idle')
    expect(eventTypes(agent).filter((type) => type === 'turn/start')).toHaveLength(1)
    agent.steer('wake up')
    await new Promise((resolve) => setTimeout(resolve, 0))
    await agent.whenIdle()
    const users = agent.session.events().filter((event) => event.type === 'user/message')
    expect(users).toHaveLength(3)
    expect(eventTypes(agent).filter((type) => type === 'turn/start')).toHaveLength(2)
  })
})
