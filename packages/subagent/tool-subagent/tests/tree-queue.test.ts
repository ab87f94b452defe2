import { afterEach, describe, expect, it, vi } from 'vitest'
import { createHarness, type Harness, type HarnessOptions } from '@dsh/testkit/harness'
import type { Agent } from '@dsh/agent'
import { textOf } from '@dsh/llm'
import { SubagentService } from '@dsh/subagent'
import { SpawnPlugin } from '@dsh/subagent-spawn'
import { TaskService } from '@dsh/tasks'
import { TaskToolsPlugin } from '@dsh/tool-tasks'
import { SubagentToolPlugin } from '@dsh/tool-subagent'

let harness: Harness
afterEach(async () => {
  await harness?.dispose()
})

/** Real services, spawn children and the task tools; `tree` is `ctx.subagents`' tree limits. */
async function setup(script: HarnessOptions['script'], tree: Record<string, number>) {
  harness = await createHarness({ script })
  await harness.plugin(SubagentService, { tree })
  await harness.plugin(SpawnPlugin, {})
  await harness.plugin(TaskService, {})
  await harness.plugin(TaskToolsPlugin)
  await harness.plugin(SubagentToolPlugin, { provider: 'spawn' })
}

/** How many children run at once, at most, as `subagent/start` and `subagent/end` tell it (of one provider, given one). */
function concurrency(provider?: string) {
  const seen = { live: 0, peak: 0, started: 0, ended: 0 }
  harness.ctx.on('subagent/start', (info) => {
    if (provider !== undefined && info.provider !== provider) return
    seen.started++
    seen.live++
    seen.peak = Math.max(seen.peak, seen.live)
  })
  harness.ctx.on('subagent/end', (info) => {
    if (provider !== undefined && info.provider !== provider) return
    seen.ended++
    seen.live--
  })
  return seen
}

function results(agent: Agent) {
  return agent.session.events().flatMap((event) =>
    event.type === 'tool/result' ? [{ name: event.result.name, text: textOf(event.result.content), isError: event.result.isError === true }] : [],
  )
}

const background = (description: string, prompt = 'child task') => ({ tool: 'subagent', args: { description, prompt, run_in_background: true } })
const foreground = (description: string, prompt = 'child task') => ({ tool: 'subagent', args: { description, prompt } })
const many = (n: number, make: (description: string) => object) => Array.from({ length: n }, (_, i) => make(`child ${i + 1}`))

describe('a cap on concurrent children per delegation tree', () => {
  it('background children over the cap are queued, not refused: at most the cap run at once and all complete', async () => {
    await setup(
      [
        { when: { depth: 1 }, reply: [{ text: 'done', delay_ms: 30 }] },
        {
          when: { depth: 0 },
          reply: [{ calls: many(6, background) }, { calls: [{ tool: 'task_list', args: {} }] }, { text: 'all started' }],
        },
      ],
      { maxConcurrent: 2 },
    )
    const seen = concurrency()
    const parent = await harness.agent()
    await parent.followup('go')
    const replies = results(parent)
    expect(replies.slice(0, 2).map((reply) => reply.text)).toEqual([expect.stringMatching(/^started background subagent task subagent-1/), expect.stringMatching(/^started background subagent task subagent-2/)])
    expect(replies.slice(2, 6).every((reply) => !reply.isError && /^queued background subagent task subagent-\d/.test(reply.text))).toBe(true)
    // task_list, a step later, still shows children waiting for a slot.
    expect(replies[6]!.text).toMatch(/subagent-6 queued \(/)
    for (let i = 1; i <= 6; i++) await harness.ctx.tasks.wait(`subagent-${i}`, parent.id, 10_000)
    expect(harness.ctx.tasks.list(parent.id).map((task) => task.status)).toEqual(Array(6).fill('completed'))
    expect(seen).toMatchObject({ started: 6, ended: 6, peak: 2 })
  })

  it('foreground calls over the cap wait, their tool calls open, and all answer', async () => {
    await setup(
      [
        { when: { depth: 1 }, reply: [{ text: 'answer', delay_ms: 20 }] },
        { when: { depth: 0 }, reply: [{ calls: many(4, foreground) }, { text: 'ok' }] },
      ],
      { maxConcurrent: 1 },
    )
    const seen = concurrency()
    const parent = await harness.agent()
    await parent.followup('go')
    expect(results(parent)).toEqual(Array(4).fill({ name: 'subagent', isError: false, text: 'answer' }))
    expect(seen).toMatchObject({ started: 4, peak: 1 })
  })

  it('cancelling a queued background child removes it without starting it', async () => {
    await setup(
      [
        { when: { depth: 1 }, reply: [{ text: 'slow', delay_ms: 300 }] },
        { when: { depth: 0 }, reply: [{ calls: many(3, background) }, { calls: [{ tool: 'task_kill', args: { task_id: 'subagent-3' } }] }, { text: 'ok' }] },
      ],
      { maxConcurrent: 1 },
    )
    const seen = concurrency()
    const parent = await harness.agent()
    await parent.followup('go')
    const killed = await harness.ctx.tasks.wait('subagent-3', parent.id, 10_000)
    expect(killed.task.status).toBe('killed')
    await harness.ctx.tasks.wait('subagent-2', parent.id, 10_000)
    expect(harness.ctx.tasks.get('subagent-2', parent.id).status).toBe('completed')
    // Two children ever started: the killed one never had an agent or a session.
    expect(seen.started).toBe(2)
  })

  it('beyond the queue bound a delegation is refused with a clear error, and nothing is started for it', async () => {
    await setup(
      [
        { when: { depth: 1 }, reply: [{ text: 'done', delay_ms: 30 }] },
        { when: { depth: 0 }, reply: [{ calls: many(3, background) }, { text: 'ok' }] },
      ],
      { maxConcurrent: 1, maxQueued: 1 },
    )
    const seen = concurrency()
    const parent = await harness.agent()
    await parent.followup('go')
    await harness.ctx.tasks.wait('subagent-2', parent.id, 10_000)
    const third = await harness.ctx.tasks.wait('subagent-3', parent.id, 10_000)
    expect(third.task).toMatchObject({ status: 'failed', detail: expect.stringMatching(/could not be started: the delegation tree of \S+ has 1 children running \(maxConcurrent 1\) and 1 waiting, the most allowed \(maxQueued 1\)/) })
    expect(seen.started).toBe(2)
  })

  it('a queued child that was cancelled frees its place in the bounded queue', async () => {
    await setup(
      [
        { when: { depth: 1 }, reply: [{ text: 'done', delay_ms: 200 }] },
        {
          when: { depth: 0 },
          reply: [
            { calls: many(2, background) },
            { call: { tool: 'task_kill', args: { task_id: 'subagent-2' } } },
            { call: background('child 3') },
            { text: 'ok' },
          ],
        },
      ],
      { maxConcurrent: 1, maxQueued: 1 },
    )
    const parent = await harness.agent()
    await parent.followup('go')
    expect(results(parent)[3]).toMatchObject({ isError: false, text: expect.stringMatching(/^queued background subagent task subagent-3/) })
    const third = await harness.ctx.tasks.wait('subagent-3', parent.id, 10_000)
    expect(third.task.status).toBe('completed')
  })

  it('a child holding the only slot can still delegate: it lends its slot to its own child (no deadlock)', async () => {
    await setup(
      [
        { when: { depth: 2 }, reply: [{ text: 'leaf answer' }] },
        { when: { depth: 1 }, reply: [{ call: foreground('grandchild', 'leaf') }, { text: 'child got: {{last_tool_result}}' }] },
        { when: { depth: 0 }, reply: [{ calls: many(2, foreground) }, { text: 'ok' }] },
      ],
      { maxConcurrent: 1 },
    )
    const parent = await harness.agent()
    await parent.followup('go')
    expect(results(parent)).toEqual(Array(2).fill({ name: 'subagent', isError: false, text: 'child got: leaf answer' }))
  })

  it('a foreground call waiting in the queue is cancelled with its turn and never starts', async () => {
    await setup(
      [
        { when: { depth: 1 }, reply: [{ text: 'slow', delay_ms: 60_000 }] },
        { when: { depth: 0 }, reply: [{ calls: many(2, foreground) }, { text: 'never' }] },
      ],
      { maxConcurrent: 1 },
    )
    const seen = concurrency()
    const parent = await harness.agent()
    const turn = parent.followup('go')
    await vi.waitFor(() => expect(seen.started).toBe(1), { interval: 5 })
    parent.cancel('stop')
    expect(await turn).toMatchObject({ reason: 'aborted' })
    await parent.whenIdle()
    expect(seen.started).toBe(1)
  })

  it('a per-provider cap holds its own children back without holding up those of other providers behind them', async () => {
    harness = await createHarness({
      script: [
        { when: { depth: 1 }, reply: [{ text: 'done', delay_ms: 40 }] },
        {
          when: { depth: 0 },
          reply: [
            {
              calls: [
                ...many(3, (description) => ({ tool: 'subagent_spare', args: { description, prompt: 'child task', run_in_background: true } })),
                ...many(2, background),
              ],
            },
            { text: 'ok' },
          ],
        },
      ],
    })
    await harness.plugin(SubagentService, { tree: { maxConcurrent: 4, maxConcurrentPerProvider: { spare: 1 } } })
    await harness.plugin(SpawnPlugin, {})
    await harness.plugin(SpawnPlugin, { providerName: 'spare' })
    await harness.plugin(TaskService, {})
    await harness.plugin(TaskToolsPlugin)
    await harness.plugin(SubagentToolPlugin, { provider: 'spawn' })
    await harness.plugin(SubagentToolPlugin, { provider: 'spare', toolName: 'subagent_spare' })
    const spare = concurrency('spare')
    const spawn = concurrency('spawn')
    const parent = await harness.agent()
    await parent.followup('go')
    const texts = results(parent).map((reply) => reply.text.split(':')[0])
    // The second and third spare children queue; the two spawn children behind them start at once.
    expect(texts).toEqual([
      'started background subagent task subagent-1; collect its answer with task_output (wait',
      expect.stringMatching(/^queued background subagent task subagent-2/),
      expect.stringMatching(/^queued background subagent task subagent-3/),
      'started background subagent task subagent-4; collect its answer with task_output (wait',
      'started background subagent task subagent-5; collect its answer with task_output (wait',
    ])
    for (let i = 1; i <= 5; i++) await harness.ctx.tasks.wait(`subagent-${i}`, parent.id, 10_000)
    expect(harness.ctx.tasks.list(parent.id).map((task) => task.status)).toEqual(Array(5).fill('completed'))
    expect(spare).toMatchObject({ started: 3, peak: 1 })
    expect(spawn).toMatchObject({ started: 2, peak: 2 })
  })
})
