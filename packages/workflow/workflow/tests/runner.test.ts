import { afterEach, describe, expect, it } from 'vitest'
import { createHarness, type Harness } from '@dsh/testkit/harness'
import { SubagentService } from '@dsh/subagent'
import { SpawnPlugin } from '@dsh/subagent-spawn'
import { describeChange, Journal, readJournal, WorkflowError, WorkflowRunner, type LoadedWorkflow, type WorkflowApi, type WorkflowSettings } from '../src/index.js'

/** The runner in process: a real harness, spawn children on a scripted model. */
let harness: Harness | undefined
afterEach(async () => {
  await harness?.dispose()
  harness = undefined
})

async function runnerWith(settings: Partial<WorkflowSettings> = {}, tree?: Record<string, unknown>) {
  harness = await createHarness({ script: [{ when: { prompt: '^slow' }, reply: [{ delay_ms: 30, text: 'slow done' }] }, { reply: [{ text: 'done' }] }] })
  await harness.plugin(SubagentService, tree ? { tree } : {})
  await harness.plugin(SpawnPlugin, {})
  const root = await harness.agent({ meta: { origin: 'workflow' } })
  const journal = new Journal(root.session)
  journal.begin('wf.mjs', 'export default async () => 1\n')
  const warnings: string[] = []
  const runner = new WorkflowRunner(harness.ctx, root, journal, { toolSettings: {}, warn: (line) => warnings.push(line), ...settings })
  return { runner, root, journal, warnings }
}

const workflow = (run: (api: WorkflowApi) => unknown): LoadedWorkflow => ({ file: 'wf.mjs', source: '', hash: '', options: {}, run: run as LoadedWorkflow['run'] })

describe('WorkflowRunner', () => {
  it('never runs more than parallel() allows at once, and keeps the items in order', async () => {
    const { runner } = await runnerWith()
    let running = 0
    let most = 0
    const outcome = await runner.run(
      workflow(({ agent, parallel }) =>
        parallel(
          Array.from({ length: 12 }, (_, index) => index),
          async (index) => {
            most = Math.max(most, ++running)
            try {
              return `${index}:${(await agent('spawn', `slow ${index}`)).text}`
            } finally {
              running--
            }
          },
          { concurrency: 3 },
        ),
      ),
    )
    expect(outcome.error).toBeUndefined()
    expect(outcome.value).toEqual(Array.from({ length: 12 }, (_, index) => `${index}:slow done`))
    expect(most).toBe(3)
    expect(outcome.calls).toEqual({ run: 12, reused: 0, failed: 0 })
  })

  it('holds parallel() to the tree cap and says so once', async () => {
    const { runner, warnings } = await runnerWith({ treeCap: 2 }, { maxConcurrent: 2 })
    let running = 0
    let most = 0
    const each = async (api: WorkflowApi) => {
      most = Math.max(most, ++running)
      await api.agent('spawn', 'slow')
      running--
    }
    await runner.run(workflow(async (api) => {
      await api.parallel([1, 2, 3, 4], () => each(api), { concurrency: 8 })
      await api.parallel([1, 2, 3], () => each(api), { concurrency: 5 })
    }))
    expect(most).toBe(2)
    expect(warnings.filter((line) => line.includes('above the tree\'s cap of 2'))).toHaveLength(1)
  })

  it('names the helpers and providers there are for a name that is neither', async () => {
    const { runner } = await runnerWith()
    const outcome = await runner.run(workflow(({ agent }) => agent('reviewr', 'hello')))
    expect(outcome.error).toBeInstanceOf(WorkflowError)
    expect((outcome.error as WorkflowError).code).toBe('UNKNOWN_HELPER')
    expect((outcome.error as Error).message).toBe('agent("reviewr"): there is no helper or provider named "reviewr"; helpers: none (define them in ./.dsh/agents/*.md); providers: spawn')
  })

  it('reuses a finished call from the record by its key, and runs the rest', async () => {
    const first = await runnerWith()
    await first.runner.run(workflow(async ({ agent }) => [await agent('spawn', 'one'), await agent('spawn', 'one'), await agent('spawn', 'two')]))
    first.journal.finish('done', 'completed')
    const reading = readJournal(first.root.session)!
    expect([...reading.completed.values()].map((list) => list.length).sort()).toEqual([1, 2])
    const { root } = first
    const journal = new Journal(root.session)
    journal.begin('wf.mjs', 'changed')
    const second = new WorkflowRunner(harness!.ctx, root, journal, { toolSettings: {}, warn: () => {}, resumed: reading })
    const outcome = await second.run(workflow(async ({ agent }) => [(await agent('spawn', 'one')).reused, (await agent('spawn', 'one')).reused, (await agent('spawn', 'one')).reused, (await agent('spawn', 'three')).reused]))
    expect(outcome.value).toEqual([true, true, false, false])
    expect(outcome.calls).toEqual({ run: 2, reused: 2, failed: 0 })
    // A reused call is recorded again, and not counted twice by the next reading.
    journal.finish('done', 'completed')
    expect(readJournal(root.session)!.completed.get(reading.completed.keys().next().value!)!.length).toBeGreaterThanOrEqual(1)
    expect([...readJournal(root.session)!.completed.values()].reduce((sum, list) => sum + list.length, 0)).toBe(5)
  })

  it('cancels what is still running when the workflow returns without waiting for it', async () => {
    const { runner } = await runnerWith()
    const outcome = await runner.run(workflow(({ agent }) => {
      void agent('spawn', 'slow left behind').catch(() => {})
      return 'returned early'
    }))
    expect(outcome.value).toBe('returned early')
    expect(harness!.ctx.agents.list().filter((agent) => agent.parent !== undefined)).toEqual([])
  })
})

describe('describeChange', () => {
  it('names the lines that differ', () => {
    expect(describeChange('a\nb\nc\n', 'a\nB\nc\n')).toBe('line 2 then, line 2 now (4 lines before, 4 now)')
    expect(describeChange('a\nc\n', 'a\nb1\nb2\nc\n')).toBe('nothing (at line 2) then, lines 2-3 now (3 lines before, 5 now)')
  })
})
