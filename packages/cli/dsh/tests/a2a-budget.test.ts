/**
 * A parent's budget reaches through an A2A worker to the worker's own children: the worker
 * (the real `dsh a2a serve` server, `serveA2a`, over HTTP on 127.0.0.1 through the A2A
 * SDK) reports what its whole subtree used, its task agent's model calls and its spawn
 * grandchildren's, so the parent counts the grandchildren's tokens against its tree's
 * budget and stops delegating once they spent it. Real parts in one process: the parent's
 * subagent service with the a2a provider and the delegation tool, the worker's subagent
 * service with spawn; only the models are scripted.
 */
import { mkdtempSync, realpathSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { createHarness, type Harness } from '@dsh/testkit/harness'
import { startA2aWorker, type A2aWorker } from '@dsh/testkit/a2a'
import type { Script } from '@dsh/llm-scripted'
import type { Session } from '@dsh/session'
import { textOf } from '@dsh/llm'
import { SubagentService, type SubagentRunEndInfo } from '@dsh/subagent'
import { SpawnPlugin } from '@dsh/subagent-spawn'
import { A2aPlugin } from '@dsh/subagent-a2a'
import { TaskService } from '@dsh/tasks'
import { TaskToolsPlugin } from '@dsh/tool-tasks'
import { SubagentToolPlugin } from '@dsh/tool-subagent'

const cleanups: Array<() => Promise<void>> = []
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
})

/** The worker's task delegates to a spawn grandchild, which works in many small steps (each a model call with usage). */
const WORKER: Script = [
  { when: { prompt: 'grand work' }, reply: [...Array.from({ length: 12 }, () => ({ text: 'the grandchild works on, one more step', call: { tool: 'task_list', args: {} } })), { text: 'grandchild done' }] },
  { when: { prompt: 'task work' }, reply: [{ call: { tool: 'subagent', args: { description: 'grandchild', prompt: 'grand work' } } }, { text: 'task done' }] },
]

async function worker(): Promise<A2aWorker> {
  const cwd = realpathSync(mkdtempSync(join(tmpdir(), 'a2a-budget-')))
  const started = await startA2aWorker(WORKER, { cwd }, async (harness) => {
    await harness.plugin(SubagentService)
    await harness.plugin(SpawnPlugin, {})
    await harness.plugin(TaskService, {})
    await harness.plugin(TaskToolsPlugin)
    await harness.plugin(SubagentToolPlugin, { provider: 'spawn', enableRunInBackground: false })
  })
  cleanups.push(() => started.dispose())
  return started
}

/** A parent whose tree may spend `outputTokens`, delegating through the a2a provider's tool. */
async function parent(url: string, script: Script, outputTokens?: number): Promise<Harness> {
  const harness = await createHarness({ script })
  cleanups.push(() => harness.dispose())
  await harness.plugin(SubagentService, outputTokens === undefined ? {} : { tree: { budget: { outputTokens } } })
  await harness.plugin(A2aPlugin, { urls: [url] })
  await harness.plugin(SubagentToolPlugin, { provider: 'a2a', enableRunInBackground: false })
  return harness
}

const delegate = (description: string) => ({ call: { tool: 'subagent', args: { description, prompt: 'task work' } } })

function used(sessions: readonly Session[]): { inputTokens: number; outputTokens: number } {
  const total = { inputTokens: 0, outputTokens: 0 }
  for (const session of sessions) {
    for (const event of session.events()) {
      if (event.type !== 'assistant/message' || event.usage === undefined) continue
      total.inputTokens += event.usage.inputTokens
      total.outputTokens += event.usage.outputTokens
    }
  }
  return total
}

function toolResults(session: Session): Array<{ text: string; isError: boolean }> {
  return session.events().flatMap((event) => (event.type === 'tool/result' ? [{ text: textOf(event.result.content), isError: event.result.isError === true }] : []))
}

describe('an A2A worker whose task delegates to a spawn grandchild', () => {
  it("reports the grandchild's tokens to its parent: the run's usage is the whole subtree's", async () => {
    const w = await worker()
    const p = await parent(w.server.url, [{ reply: [delegate('through the worker'), { text: 'parent done' }] }])
    const ends: SubagentRunEndInfo[] = []
    p.ctx.on('subagent/end', (info) => void ends.push(info))
    const agent = await p.agent()
    await agent.followup('go')
    expect(toolResults(agent.session)[0]).toMatchObject({ isError: false })
    // Two sessions on the worker: the task's and its grandchild's, which spent most of it.
    expect(w.sessions).toHaveLength(2)
    const [task, grandchild] = [w.sessions.find((s) => s.header.origin === 'a2a')!, w.sessions.find((s) => s.header.origin !== 'a2a')!]
    expect(used([grandchild]).outputTokens).toBeGreaterThan(used([task]).outputTokens)
    expect(ends).toHaveLength(1)
    expect(ends[0]!.usage).toMatchObject(used([task, grandchild]))
  })

  it("a parent's output budget stops the tree that spends it through the worker's grandchildren: the next delegation is refused", async () => {
    const budget = 100
    const w = await worker()
    const p = await parent(w.server.url, [{ reply: [delegate('first'), delegate('second'), { text: 'parent done' }] }], budget)
    const agent = await p.agent()
    await agent.followup('go')
    const [, second] = toolResults(agent.session)
    expect(second).toMatchObject({ isError: true, text: expect.stringMatching(new RegExp(`^the subagent could not be started: budget: the delegation tree's output-token budget of ${budget} is spent`)) })
    // The second task never reached the worker: only the first task and its grandchild ran there.
    expect(w.sessions).toHaveLength(2)
    // The grandchild was stopped within a step or two of the budget (a step is under 17 output tokens).
    expect(used(w.sessions).outputTokens).toBeGreaterThanOrEqual(budget)
    expect(used(w.sessions).outputTokens).toBeLessThanOrEqual(budget + 3 * 17)
  })
})
