import { afterEach, describe, expect, it, vi } from 'vitest'
import { createHarness, type Harness, type HarnessOptions } from '@dsh/testkit/harness'
import type { Agent } from '@dsh/agent'
import { textOf } from '@dsh/llm'
import type { SessionEvent } from '@dsh/session'
import { TaskService, type TaskOutcome } from '@dsh/tasks'
import { TaskToolsPlugin } from '@dsh/tool-tasks'

let harness: Harness
let jobs: Map<string, (outcome: TaskOutcome) => void>
/** Releases the `block` tool's current call. */
let release: () => void
let blocked: Promise<void>

afterEach(async () => {
  await harness?.dispose()
})

/**
 * Real services, the scripted model, the real task tools, and two test tools: `start_job`
 * registers a task the test settles by hand, `block` holds a step open until released.
 */
async function setup(script: HarnessOptions['script'], config: Partial<TaskService.Config> = {}) {
  harness = await createHarness({ script })
  await harness.plugin(TaskService, config)
  await harness.plugin(TaskToolsPlugin, {})
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
  let entered!: () => void
  blocked = new Promise<void>((resolve) => (entered = resolve))
  harness.ctx.tools.register({
    name: 'block',
    description: 'hold the step open',
    parameters: { type: 'object' },
    execute: () =>
      new Promise<string>((resolve) => {
        release = () => resolve('released')
        entered()
      }),
  })
}

const NOTICE = /^Background task update/

function notices(agent: Agent): string[] {
  return agent.session.events().flatMap((event) => (event.type === 'user/message' && NOTICE.test(textOf(event.message.content)) ? [textOf(event.message.content)] : []))
}

function turns(agent: Agent): number {
  return agent.session.events().filter((event) => event.type === 'turn/start').length
}

function toolResults(agent: Agent, name: string): string[] {
  return agent.session.events().flatMap((event: SessionEvent) => (event.type === 'tool/result' && event.result.name === name ? [textOf(event.result.content)] : []))
}

async function idleAfterTurns(agent: Agent, count: number): Promise<void> {
  await vi.waitFor(() => expect(turns(agent)).toBe(count), { timeout: 5_000, interval: 5 })
  await agent.whenIdle()
}

/** Let settlement callbacks and any wake-up they cause run. */
const settle = () => new Promise((resolve) => setTimeout(resolve, 30))

describe('completion notices', () => {
  it('an idle owner is woken by exactly one notice, with a new turn', async () => {
    await setup([{ reply: [{ call: { tool: 'start_job', args: { label: 'build' } } }, { text: 'started it' }, { text: 'noticed' }] }])
    const owner = await harness.agent()
    await owner.followup('go')
    expect(turns(owner)).toBe(1)
    jobs.get('job-1')!({ status: 'completed', output: 'built', detail: 'all green' })
    await idleAfterTurns(owner, 2)
    const [notice, ...rest] = notices(owner)
    expect(rest).toEqual([])
    expect(notice).toContain('job-1 completed (all green) · job: build')
    expect(notice).toContain('task_output (job-1)')
    expect(harness.ctx.tasks.get('job-1', owner.id).reported).toBe(true)
    // Reading it now changes nothing: it was announced once and only once.
    harness.ctx.tasks.read('job-1', owner.id)
    await settle()
    expect(notices(owner)).toHaveLength(1)
    expect(turns(owner)).toBe(2)
  })

  it('a busy owner gets the notice injected into its running turn, not a new one', async () => {
    await setup([{ reply: [{ call: { tool: 'start_job', args: {} } }, { call: { tool: 'block', args: {} } }, { text: 'finished' }] }])
    const owner = await harness.agent()
    const turn = owner.followup('go')
    await blocked
    jobs.get('job-1')!({ status: 'failed', detail: 'exit code 2' })
    await settle()
    release()
    expect((await turn).reason).toBe('completed')
    await settle()
    expect(turns(owner)).toBe(1)
    expect(notices(owner)).toEqual([expect.stringContaining('job-1 failed: exit code 2')])
    // Delivered at the step boundary: after the blocking step's result, before the next response.
    const types = owner.session.events().map((event) => event.type)
    const noticeAt = owner.session.events().findIndex((event) => event.type === 'user/message' && NOTICE.test(textOf(event.message.content)))
    expect(types.slice(noticeAt - 1, noticeAt + 2)).toEqual(['step/start', 'user/message', 'assistant/message'])
  })

  it('a cancelled turn is not followed by a turn started by a waiting notice', async () => {
    await setup([{ reply: [{ call: { tool: 'start_job', args: {} } }, { call: { tool: 'block', args: {} } }, { text: 'next turn' }] }])
    const owner = await harness.agent()
    const turn = owner.followup('go')
    await blocked
    jobs.get('job-1')!({ status: 'completed', output: 'done' })
    await settle()
    owner.cancel()
    release()
    expect((await turn).reason).toBe('aborted')
    await settle()
    await owner.whenIdle()
    expect(turns(owner)).toBe(1)
    expect(notices(owner)).toEqual([])
  })

  it('is suppressed by a read in the same step the task settled in', async () => {
    await setup([
      { reply: [{ call: { tool: 'start_job', args: {} } }, { calls: [{ tool: 'block', args: {} }, { tool: 'task_output', args: { task_id: 'job-1' } }] }, { text: 'done' }] },
    ])
    const owner = await harness.agent()
    const turn = owner.followup('go')
    await blocked
    jobs.get('job-1')!({ status: 'completed', output: 'the result' })
    await settle()
    release()
    await turn
    await settle()
    expect(toolResults(owner, 'task_output')).toEqual([expect.stringMatching(/^job-1 completed · job: a job\nthe result$/)])
    expect(notices(owner)).toEqual([])
    expect(turns(owner)).toBe(1)
  })

  it('is suppressed by a wait that returns the settlement', async () => {
    await setup([{ reply: [{ call: { tool: 'start_job', args: {} } }, { call: { tool: 'task_output', args: { task_id: 'job-1', wait: true, timeout_ms: 10_000 } } }, { text: 'done' }] }])
    const owner = await harness.agent()
    const turn = owner.followup('go')
    await vi.waitFor(() => expect(owner.session.events().some((event) => event.type === 'tool/call' && event.call.name === 'task_output')).toBe(true), { interval: 5 })
    await settle()
    jobs.get('job-1')!({ status: 'completed', output: 'waited for' })
    await turn
    await settle()
    expect(toolResults(owner, 'task_output')).toEqual([expect.stringContaining('job-1 completed · job: a job\nwaited for')])
    expect(notices(owner)).toEqual([])
    expect(turns(owner)).toBe(1)
  })

  it('is suppressed by a kill', async () => {
    await setup([{ reply: [{ call: { tool: 'start_job', args: {} } }, { call: { tool: 'task_kill', args: { task_id: 'job-1', reason: 'not needed' } } }, { text: 'done' }] }])
    const owner = await harness.agent()
    await owner.followup('go')
    await settle()
    expect(toolResults(owner, 'task_kill')).toEqual(['job-1 killed: not needed · job: a job'])
    expect(notices(owner)).toEqual([])
    expect(turns(owner)).toBe(1)
  })

  it('bounds consecutive wake-ups; a held notice reaches the owner in its next turn', async () => {
    await setup(
      [
        {
          reply: [
            { calls: [{ tool: 'start_job', args: {} }, { tool: 'start_job', args: {} }, { tool: 'start_job', args: {} }] },
            { text: 'started three' },
            { text: 'woken once' },
            { text: 'woken twice' },
            { text: 'answering the user' },
          ],
        },
      ],
      { maxConsecutiveWakeups: 2 },
    )
    const owner = await harness.agent()
    await owner.followup('go')
    jobs.get('job-1')!({ status: 'completed' })
    await idleAfterTurns(owner, 2)
    jobs.get('job-2')!({ status: 'completed' })
    await idleAfterTurns(owner, 3)
    jobs.get('job-3')!({ status: 'completed' })
    await settle()
    expect(turns(owner)).toBe(3)
    expect(notices(owner)).toHaveLength(2)
    await owner.followup('anything new?')
    const all = notices(owner)
    expect(all).toHaveLength(3)
    expect(all[2]).toContain('job-3 completed')
  })
})

describe('notices across a reload of the notice plugin', () => {
  it('a task that settles while the plugin is unloaded is announced once it is loaded again', async () => {
    await setup([{ reply: [{ call: { tool: 'start_job', args: {} } }, { text: 'started' }, { text: 'noticed after the reload' }] }])
    const owner = await harness.agent()
    await owner.followup('go')
    await Promise.all([...harness.ctx.registry.get(TaskToolsPlugin)!.fibers].map((fiber) => fiber.dispose()))
    jobs.get('job-1')!({ status: 'completed', output: 'built' })
    await vi.waitFor(() => expect(harness.ctx.tasks.get('job-1', owner.id)).toMatchObject({ status: 'completed', reported: false }), { interval: 5 })
    await owner.whenIdle()
    expect(turns(owner)).toBe(1)
    await harness.plugin(TaskToolsPlugin, {})
    await idleAfterTurns(owner, 2)
    expect(notices(owner)).toEqual([expect.stringContaining('job-1 completed')])
  })
})

describe('the task tools', () => {
  it('render compact status lines and keep to the caller\'s own tasks', async () => {
    await setup([
      { when: { prompt: 'owner' }, reply: [{ call: { tool: 'start_job', args: { label: 'index the repo' } } }, { call: { tool: 'task_list', args: {} } }, { text: 'ok' }] },
      {
        when: { prompt: 'intruder' },
        reply: [
          { calls: [{ tool: 'task_output', args: { task_id: 'job-1' } }, { tool: 'task_kill', args: { task_id: 'job-1' } }, { tool: 'task_list', args: {} }] },
          { text: 'blocked' },
        ],
      },
    ])
    const owner = await harness.agent()
    await owner.followup('owner')
    expect(toolResults(owner, 'task_list')).toEqual([expect.stringMatching(/^job-1 running \(\d+ms\) · job: index the repo$/)])
    const intruder = await harness.agent()
    await intruder.followup('intruder')
    const refusals = intruder.session.events().flatMap((event) => (event.type === 'tool/result' ? [event.result] : []))
    expect(refusals.map((result) => [result.name, result.isError === true, textOf(result.content)])).toEqual([
      ['task_output', true, expect.stringContaining('task job-1 belongs to another session')],
      ['task_kill', true, expect.stringContaining('task job-1 belongs to another session')],
      ['task_list', false, 'no background tasks'],
    ])
    expect(harness.ctx.tasks.get('job-1', owner.id).status).toBe('running')
  })
})
