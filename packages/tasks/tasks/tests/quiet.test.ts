import { afterEach, describe, expect, it } from 'vitest'
import { createHarness, gateTool, type Harness, type HarnessOptions } from '@dsh/testkit/harness'
import type { Agent } from '@dsh/agent'
import { outputText } from '@dsh/llm'
import { runUntilQuiet, TaskService, type TaskOutcome } from '@dsh/tasks'
import { TaskToolsPlugin } from '@dsh/tool-tasks'

let harness: Harness
/** Settles the jobs `start_job` registered, by task id. */
let jobs: Map<string, (outcome: TaskOutcome) => void>

afterEach(async () => {
  await harness?.dispose()
})

/** The real agent, loop, task registry and notices; `start_job` registers a task the test settles. */
async function setup(script: HarnessOptions['script']) {
  harness = await createHarness({ script })
  await harness.plugin(TaskService)
  await harness.plugin(TaskToolsPlugin)
  jobs = new Map()
  harness.ctx.tools.register<{ label?: string }>({
    name: 'start_job',
    description: 'start a job',
    parameters: { type: 'object', properties: { label: { type: 'string' } } },
    execute: (args, exec) => {
      let finish!: (outcome: TaskOutcome) => void
      const done = new Promise<TaskOutcome>((resolve) => (finish = resolve))
      const id = harness.ctx.tasks.register({ kind: 'job', label: args.label ?? 'a job', owner: exec.agent.id, cancel: () => finish({ status: 'killed' }), done })
      jobs.set(id, finish)
      return `started ${id}`
    },
  })
}

/** Resolves at the agent's next `turn/end`. */
function nextTurnEnd(agent: Agent): Promise<void> {
  return new Promise((resolve) => {
    const stop = agent.session.subscribe((update) => {
      if (update.type !== 'turn/end') return
      stop()
      resolve()
    })
  })
}

function lastEvent(agent: Agent) {
  return agent.session.at(agent.session.length - 1)
}

const startJob = { call: { tool: 'start_job', args: { label: 'build' } } }

describe('runUntilQuiet', () => {
  it('covers the turns completion notices start and answers with the last text', async () => {
    await setup([{ reply: [startJob, { text: 'started the build' }, { text: 'the build passed' }] }])
    const agent = await harness.agent()
    const firstTurnEnded = nextTurnEnd(agent)
    const run = runUntilQuiet(agent, 'build it', { tasks: harness.ctx.tasks })
    await firstTurnEnded
    jobs.get('job-1')!({ status: 'completed', output: 'ok' })
    const quiet = await run
    expect(quiet.cancelled).toBe(false)
    expect(quiet.last).toMatchObject({ turn: 2, reason: 'completed' })
    expect(outputText(quiet.output)).toBe('the build passed')
    expect(harness.ctx.tasks.hasLive(agent.id)).toBe(false)
  })

  it('a notice turn that fails is the run outcome', async () => {
    await setup([{ reply: [startJob, { text: 'started' }, { error: 'simulated overload' }] }])
    const agent = await harness.agent()
    const firstTurnEnded = nextTurnEnd(agent)
    const run = runUntilQuiet(agent, 'build it', { tasks: harness.ctx.tasks })
    await firstTurnEnded
    jobs.get('job-1')!({ status: 'completed' })
    const quiet = await run
    expect(quiet.last).toMatchObject({ turn: 2, reason: 'error' })
    expect(quiet.last.error).toContain('simulated overload')
    expect(outputText(quiet.output)).toBe('started')
  })

  it('a cancel while waiting on background work kills the tasks, ends aborted and is recorded in the session', async () => {
    // One reply after the first turn: a model request for the cancel would fail the run with `error`.
    await setup([{ reply: [startJob, { text: 'started' }] }])
    const agent = await harness.agent()
    const controller = new AbortController()
    const firstTurnEnded = nextTurnEnd(agent)
    const run = runUntilQuiet(agent, 'build it', { tasks: harness.ctx.tasks, signal: controller.signal })
    await firstTurnEnded
    expect(harness.ctx.tasks.hasLive(agent.id)).toBe(true)
    controller.abort(new Error('interrupted by Ctrl-C'))
    const quiet = await run
    expect(quiet.cancelled).toBe(true)
    expect(quiet.last).toMatchObject({ turn: 2, reason: 'aborted' })
    expect(quiet.last.error).toContain('interrupted by Ctrl-C')
    expect(harness.ctx.tasks.get('job-1', agent.id)).toMatchObject({ status: 'killed' })
    expect(lastEvent(agent)).toMatchObject({ type: 'turn/end', turn: 2, reason: 'aborted' })
    // The recorded turn ran no step: nothing was asked of the model.
    expect(agent.session.events(quiet.last.startSeq).map((event) => event.type)).toEqual(['turn/start', 'turn/end'])
    expect(outputText(quiet.output)).toBe('started')
  })

  it('a cancel during the turn aborts that turn and kills the tasks it started', async () => {
    await setup([{ reply: [{ calls: [startJob.call, { tool: 'gate' }] }, { text: 'never reached' }] }])
    const gate = gateTool(harness)
    const agent = await harness.agent()
    const controller = new AbortController()
    const run = runUntilQuiet(agent, 'build it', { tasks: harness.ctx.tasks, signal: controller.signal })
    await gate.entered
    controller.abort()
    gate.release()
    const quiet = await run
    expect(quiet.cancelled).toBe(true)
    expect(quiet.last).toMatchObject({ turn: 1, reason: 'aborted' })
    expect(harness.ctx.tasks.get('job-1', agent.id)).toMatchObject({ status: 'killed' })
    // The aborted turn is the record: no second turn is added for the same cancel.
    expect(agent.session.events().filter((event) => event.type === 'turn/start')).toHaveLength(1)
  })

  it('an already-aborted signal records an aborted turn and asks the model nothing', async () => {
    await setup([{ reply: [{ error: 'the model must not be asked' }] }])
    const agent = await harness.agent()
    const controller = new AbortController()
    controller.abort()
    const quiet = await runUntilQuiet(agent, 'build it', { tasks: harness.ctx.tasks, signal: controller.signal })
    expect(quiet.cancelled).toBe(true)
    expect(quiet.last.reason).toBe('aborted')
    expect(agent.session.events().some((event) => event.type === 'assistant/message')).toBe(false)
    expect(quiet.output).toEqual([])
  })

  it('a cancel followed by disposal while waiting still reports an aborted, cancelled run', async () => {
    await setup([{ reply: [startJob, { text: 'started' }] }])
    const agent = await harness.agent()
    const controller = new AbortController()
    const firstTurnEnded = nextTurnEnd(agent)
    const run = runUntilQuiet(agent, 'build it', { tasks: harness.ctx.tasks, signal: controller.signal })
    await firstTurnEnded
    controller.abort(new Error('interrupted'))
    await agent.dispose()
    const quiet = await run
    expect(quiet).toMatchObject({ cancelled: true, last: { turn: 1, reason: 'aborted' } })
  })

  it('works without a task runtime: one turn, its answer', async () => {
    await setup([{ reply: [{ text: 'hello' }] }])
    const agent = await harness.agent()
    const quiet = await runUntilQuiet(agent, 'hi', {})
    expect(quiet).toMatchObject({ cancelled: false, last: { turn: 1, reason: 'completed' } })
    expect(outputText(quiet.output)).toBe('hello')
  })
})
