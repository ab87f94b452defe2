import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import SessionJsonl from '@dsh/session-jsonl'
import { createHarness, type Harness, type HarnessOptions } from '@dsh/testkit/harness'
import { serviceInstance, type Agent } from '@dsh/agent'
import type { PriceTable } from '@dsh/llm'
import { textOf } from '@dsh/llm'
import { SubagentService, type SubagentProvider, type SubagentResult, type SubagentRunEndInfo } from '@dsh/subagent'
import { SpawnPlugin } from '@dsh/subagent-spawn'
import { TaskService } from '@dsh/tasks'
import { TaskToolsPlugin } from '@dsh/tool-tasks'
import { SubagentToolPlugin } from '@dsh/tool-subagent'

let harness: Harness
afterEach(async () => {
  await harness?.dispose()
})

async function setup(script: HarnessOptions['script'], tree: Record<string, unknown>) {
  harness = await createHarness({ script })
  await harness.plugin(SubagentService, { tree })
  await harness.plugin(SpawnPlugin, {})
  await harness.plugin(TaskService, {})
  await harness.plugin(TaskToolsPlugin)
  await harness.plugin(SubagentToolPlugin, { provider: 'spawn' })
}

/** Every child's start (ms) and end, with its usage, as the lifecycle events tell it. */
function follow() {
  const starts: number[] = []
  const ends: Array<SubagentRunEndInfo & { at: number }> = []
  harness.ctx.on('subagent/start', () => void starts.push(Date.now()))
  harness.ctx.on('subagent/end', (info) => void ends.push({ ...info, at: Date.now() }))
  return { starts, ends }
}

function results(agent: Agent) {
  return agent.session.events().flatMap((event) => (event.type === 'tool/result' ? [{ text: textOf(event.result.content), isError: event.result.isError === true }] : []))
}

const background = (description: string) => ({ tool: 'subagent', args: { description, prompt: 'child task', run_in_background: true } })
const foreground = (description: string) => ({ tool: 'subagent', args: { description, prompt: 'child task' } })
const many = (n: number, make: (description: string) => object) => Array.from({ length: n }, (_, i) => make(`child ${i + 1}`))
/** A child that works in many small steps (each a model call with usage), then answers. */
const steppingChild = { when: { depth: 1 }, reply: [...Array.from({ length: 8 }, () => ({ text: 'still working through the list, one more step', call: { tool: 'task_list', args: {} }, delay_ms: 15 })), { text: 'finished' }] }
const outputOf = (ends: SubagentRunEndInfo[]) => ends.reduce((sum, end) => sum + (end.usage?.outputTokens ?? 0), 0)

describe('a tree budget of output tokens', () => {
  it('stops a background fan-out at the limit: running children stopped, none started after, the parent told, spend within one step per running child', async () => {
    const budget = 60
    await setup(
      [steppingChild, { when: { depth: 0 }, reply: [{ calls: many(6, background) }, { text: 'waiting' }] }],
      { maxConcurrent: 2, budget: { outputTokens: budget } },
    )
    const { starts, ends } = follow()
    const parent = await harness.agent()
    await parent.followup('go')
    for (let i = 1; i <= 6; i++) await harness.ctx.tasks.wait(`subagent-${i}`, parent.id, 10_000)
    const tasks = harness.ctx.tasks.list(parent.id)
    // No child finished its eight steps: those running were stopped, the queued ones never started.
    expect(tasks.every((task) => task.status === 'failed')).toBe(true)
    const stopped = tasks.filter((task) => /this child was stopped/.test(task.detail ?? ''))
    const refused = tasks.filter((task) => /could not be started: budget: .*no more children start/.test(task.detail ?? ''))
    expect(stopped.length).toBeGreaterThan(0)
    expect(stopped.length + refused.length).toBe(6)
    expect(stopped[0]!.detail).toMatch(new RegExp(`^budget: the delegation tree's output-token budget of ${budget} is spent \\(\\d+ output tokens used by its children\\)`))
    // Nothing started once the first child was stopped.
    const firstStop = Math.min(...ends.map((end) => end.at))
    expect(starts.every((at) => at <= firstStop)).toBe(true)
    expect(starts.length).toBe(stopped.length)
    // One step of a child is a line of text and a task_list call, under 17 output tokens. At most two ran at once.
    const spent = outputOf(ends)
    expect(spent).toBeGreaterThanOrEqual(budget)
    expect(spent).toBeLessThanOrEqual(budget + 2 * 17)
  })

  it('a foreground child stopped by the budget is an error result naming the budget and the spend, and the next delegation is refused', async () => {
    await setup(
      [
        steppingChild,
        { when: { depth: 0 }, reply: [{ call: foreground('first') }, { call: foreground('second') }, { text: 'gave up' }] },
      ],
      { budget: { outputTokens: 12 } },
    )
    const parent = await harness.agent()
    expect(await parent.followup('go')).toMatchObject({ reason: 'completed' })
    const [first, second] = results(parent)
    expect(first).toMatchObject({ isError: true, text: expect.stringMatching(/^the subagent ended budget: the delegation tree's output-token budget of 12 is spent \(\d+ output tokens used by its children\); this child was stopped/) })
    expect(second).toMatchObject({ isError: true, text: expect.stringMatching(/^the subagent could not be started: budget: the delegation tree's output-token budget of 12 is spent/) })
  })

  it('counts grandchildren: the whole tree shares one budget', async () => {
    await setup(
      [
        { when: { depth: 2 }, reply: steppingChild.reply },
        { when: { depth: 1 }, reply: [{ call: foreground('grandchild') }, { text: 'child got: {{last_tool_result}}' }] },
        { when: { depth: 0 }, reply: [{ call: foreground('child') }, { text: 'done' }] },
      ],
      { budget: { outputTokens: 20 } },
    )
    const { ends } = follow()
    const parent = await harness.agent()
    await parent.followup('go')
    expect(results(parent)[0]!.text).toMatch(/budget: the delegation tree's output-token budget of 20 is spent/)
    // The grandchild (deeper) was stopped by the root's budget.
    expect(ends.find((end) => end.parentId !== parent.id)).toMatchObject({ stopReason: 'budget', diagnostic: expect.stringMatching(/^budget: /) })
  })
})

describe('a remote child under a tree budget', () => {
  it('counts the usage its provider reports through progress while it runs, and cancels it at the limit', async () => {
    const cancels: string[] = []
    // Out of process as far as the gate knows: usage arrives only as progress reports.
    const remote: SubagentProvider = {
      name: 'remote',
      capabilities: { outputSchema: false, depthLimit: true, toolFilter: false, persona: false },
      inheritsParentContext: false,
      start: async (request) => {
        let finish!: (result: SubagentResult) => void
        const result = new Promise<SubagentResult>((resolve) => (finish = resolve))
        let outputTokens = 0
        const timer = setInterval(() => {
          outputTokens += 10
          request.progress?.report({ kind: 'usage', usage: { inputTokens: 100, outputTokens, cachedInputTokens: 0 } })
          // A transport that restarts its count grants nothing back.
          request.progress?.report({ kind: 'usage', usage: { inputTokens: 0, outputTokens: 0, cachedInputTokens: 0 } })
        }, 5)
        return {
          id: 'remote:1',
          local: false,
          result,
          cancel: (reason) => {
            cancels.push(reason instanceof Error ? reason.message : String(reason))
            clearInterval(timer)
            finish({ output: [], stopReason: 'aborted' })
          },
          dispose: async () => clearInterval(timer),
        }
      },
    }
    harness = await createHarness({ script: [{ reply: [{ call: { tool: 'subagent', args: { description: 'far away', prompt: 'work' } } }, { text: 'done' }] }] })
    await harness.plugin(SubagentService, { tree: { budget: { outputTokens: 45 } } })
    await harness.plugin({ name: 'remote-provider', inject: ['subagents'], apply: (ctx: Harness['ctx']) => void ctx.subagents.registerProvider(remote) })
    await harness.plugin(TaskService, {})
    await harness.plugin(TaskToolsPlugin)
    await harness.plugin(SubagentToolPlugin, { provider: 'remote' })
    const parent = await harness.agent()
    await parent.followup('go')
    expect(cancels).toEqual([expect.stringMatching(/^budget: the delegation tree's output-token budget of 45 is spent \(50 output tokens used by its children\); this child was stopped$/)])
    expect(results(parent)[0]).toMatchObject({ isError: true, text: expect.stringMatching(/^the subagent ended budget: .*\(50 output tokens used by its children\)/) })
  })
})

describe('a tree budget of cost', () => {
  /** The llm service's price table, as its `prices` config would set it. */
  const price = (prices: PriceTable) => {
    ;(serviceInstance(harness.ctx.llm) as { prices: PriceTable }).prices = prices
  }

  it('prices each model call of the children by the prices table and stops them at the limit', async () => {
    await setup([steppingChild, { when: { depth: 0 }, reply: [{ call: foreground('first') }, { text: 'done' }] }], { budget: { cost: 0.04 } })
    // 1,000 a million output tokens: the budget is 40 output tokens.
    price({ 'scripted:test': { input: 0, output: 1000 } })
    const parent = await harness.agent()
    await parent.followup('go')
    expect(results(parent)[0]).toMatchObject({ isError: true, text: expect.stringMatching(/^the subagent ended budget: the delegation tree's cost budget of 0.04 is spent \(0\.0[45]\d* used by its children, by the prices table\); this child was stopped/) })
  })

  it('stops a child whose model has no price, and refuses to start any child without a price table', async () => {
    await setup([steppingChild, { when: { depth: 0 }, reply: [{ call: foreground('first') }, { text: 'done' }] }], { budget: { cost: 1 } })
    const parent = await harness.agent()
    await parent.followup('go')
    expect(results(parent)[0]!.text).toMatch(/^the subagent could not be started: tree\.budget\.cost \(1\) needs a price table/)
    price({ 'other:model': { input: 1, output: 1 } })
    const second = await harness.agent()
    await second.followup('go')
    expect(results(second)[0]!.text).toMatch(/^the subagent ended budget: the delegation tree has a cost budget of 1, but model "scripted:test" has no price in the prices table/)
  })
})

describe('a tree budget of children started', () => {
  it('refuses the delegation past the number, naming the budget; the children before it run', async () => {
    await setup(
      [{ when: { depth: 1 }, reply: [{ text: 'ok' }] }, { when: { depth: 0 }, reply: [{ calls: many(3, foreground) }, { text: 'done' }] }],
      { budget: { children: 2 } },
    )
    const parent = await harness.agent()
    await parent.followup('go')
    const replies = results(parent)
    expect(replies.filter((reply) => !reply.isError)).toHaveLength(2)
    expect(replies.find((reply) => reply.isError)?.text).toMatch(/^the subagent could not be started: budget: the delegation tree's children budget of 2 is spent \(2 started\)/)
  })
})

describe('tree limits in config', () => {
  it('refuses zero, negative, fractional and absurd limits', () => {
    for (const tree of [{ budget: { outputTokens: 0 } }, { budget: { inputTokens: -5 } }, { budget: { outputTokens: 1e13 } }, { budget: { children: 2.5 } }, { maxConcurrent: 0 }, { maxQueued: -1 }, { maxConcurrentPerProvider: { acp: 0 } }, { budget: { cost: 0 } }, { budget: { cost: -1 } }]) {
      expect(() => SubagentService.Config({ tree } as never), JSON.stringify(tree)).toThrow()
    }
    expect(SubagentService.Config({ tree: { maxConcurrent: 8, budget: { outputTokens: 10_000, children: 200 } } } as never)).toMatchObject({ tree: { maxConcurrent: 8, budget: { outputTokens: 10_000, children: 200 } } })
  })
})

describe('a continuable child under a tree budget', () => {
  it('counts its turns against the tree, stops its running turn with budget when the tree is spent, and refuses another once it is', async () => {
    await setup([steppingChild, { when: { depth: 0 }, reply: [{ text: 'unused' }] }], { budget: { outputTokens: 40 } })
    // Continuable children must be reachable after a restart: a real store.
    const dir = mkdtempSync(join(tmpdir(), 'dsh-continuable-budget-'))
    await harness.plugin(SessionJsonl, { dir })
    const parent = await harness.agent()
    const { childId } = await harness.ctx.subagents.startContinuable({ provider: 'spawn', label: 'kept', request: { prompt: [{ type: 'text', text: 'child task' }], parent }, signal: new AbortController().signal })
    const child = serviceInstance(harness.ctx.agents).get(childId)!
    await child.whenIdle()
    // The turn's end is logged as it settles: wait for it, not for a guess at how long that takes.
    while (!child.session.events().some((event) => event.type === 'turn/end')) await new Promise((resolve) => setTimeout(resolve, 10))
    const end = child.session.events().findLast((event) => event.type === 'turn/end')
    expect(end).toMatchObject({ reason: 'budget', error: expect.stringMatching(/^budget: the delegation tree's output-token budget of 40 is spent/) })
    await expect(harness.ctx.subagents.startContinuable({ provider: 'spawn', label: 'another', request: { prompt: [{ type: 'text', text: 'child task' }], parent }, signal: new AbortController().signal })).rejects.toMatchObject({ code: 'BUDGET' })
    // Nor does the stopped child take another turn.
    await expect(harness.ctx.subagents.followup(parent, childId, 'carry on')).rejects.toMatchObject({ code: 'BUDGET', message: expect.stringMatching(/takes no more turns|take no more turns/) })
    await harness.dispose()
    rmSync(dir, { recursive: true, force: true })
  })
})


describe('a continuable helper with a budget of its own', () => {
  it('is held to it over its turns without any tree config: its turn ends budget, and it takes no more', async () => {
    await setup([steppingChild, { when: { depth: 0 }, reply: [{ text: 'unused' }] }], {})
    const dir = mkdtempSync(join(tmpdir(), 'dsh-continuable-own-budget-'))
    await harness.plugin(SessionJsonl, { dir })
    const parent = await harness.agent()
    const { childId } = await harness.ctx.subagents.startContinuable({
      provider: 'spawn',
      label: 'kept',
      request: { prompt: [{ type: 'text', text: 'child task' }], parent, budget: { outputTokens: 30 } },
      signal: new AbortController().signal,
    })
    const child = serviceInstance(harness.ctx.agents).get(childId)!
    await child.whenIdle()
    // The turn's end is logged as it settles: wait for it, not for a guess at how long that takes.
    while (!child.session.events().some((event) => event.type === 'turn/end')) await new Promise((resolve) => setTimeout(resolve, 10))
    const end = child.session.events().findLast((event) => event.type === 'turn/end')
    expect(end).toMatchObject({ reason: 'budget', error: expect.stringMatching(/^budget: this child's output-token budget of 30 is spent/) })
    await expect(harness.ctx.subagents.followup(parent, childId, 'carry on')).rejects.toMatchObject({ code: 'BUDGET' })
    await harness.dispose()
    rmSync(dir, { recursive: true, force: true })
  })

  it('counts against a children budget like any child', async () => {
    await setup([{ when: { depth: 1 }, reply: [{ text: 'ok' }] }, { when: { depth: 0 }, reply: [{ text: 'unused' }] }], { budget: { children: 1 } })
    const dir = mkdtempSync(join(tmpdir(), 'dsh-continuable-children-'))
    await harness.plugin(SessionJsonl, { dir })
    const parent = await harness.agent()
    const start = () => harness.ctx.subagents.startContinuable({ provider: 'spawn', label: 'kept', request: { prompt: [{ type: 'text', text: 'child task' }], parent }, signal: new AbortController().signal })
    await start()
    await expect(start()).rejects.toMatchObject({ code: 'BUDGET', message: expect.stringMatching(/children budget of 1 is spent/) })
    await harness.dispose()
    rmSync(dir, { recursive: true, force: true })
  })
})

describe('a session bounded by the budget its delegation gave it', () => {
  it('stays stopped once it is spent: its next prompt ends budget before any model call', async () => {
    await setup([{ when: { depth: 0 }, reply: steppingChild.reply }], {})
    const root = await harness.ctx.agents.create({ meta: { origin: 'acp', budget: { outputTokens: 20 } } })
    await harness.ctx.subagents.boundByLineage(root)
    const first = await root.followup('go')
    expect(first.reason).toBe('budget')
    const before = root.session.events().filter((event) => event.type === 'assistant/message').length
    const second = await root.followup('carry on anyway')
    expect(second.reason).toBe('budget')
    expect(root.session.events().filter((event) => event.type === 'assistant/message').length).toBe(before)
  })
})

describe('a wall-time budget longer than a timer can hold', () => {
  it('does not stop a child at once (29 days is past what one Node timer holds)', async () => {
    await setup([{ when: { depth: 1 }, reply: [{ text: 'finished', delay_ms: 30 }] }, { when: { depth: 0 }, reply: [{ call: foreground('child') }, { text: 'done' }] }], { budget: { wallTimeMs: 29 * 24 * 3600 * 1000 } })
    const parent = await harness.agent()
    await parent.followup('go')
    expect(results(parent)[0]).toMatchObject({ isError: false, text: expect.stringContaining('finished') })
  })
})
