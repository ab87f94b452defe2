// A workflow's calls against a parent's fan-out, in one sitting: 1,000 trivial spawn
// delegations 16 at a time, made by dsh workflow's runner (`@dsh/workflow`: parallel() over
// agent(), each call keyed and recorded in the root session) and by one parent turn whose
// single step asks for all 1,000 through the subagent tool, the tree's cap (16) queueing
// them. Rounds alternate the two in the same process; the figures are the medians.
// Prints one JSON object: { name: value, ... } (run through bench/run.js).
import { createHarness } from '@dsh/testkit/harness'
import { SubagentService } from '@dsh/subagent'
import { SpawnPlugin } from '@dsh/subagent-spawn'
import { SubagentToolPlugin } from '@dsh/tool-subagent'
import { Journal, WorkflowRunner } from '@dsh/workflow'

const [name, arg] = process.argv.slice(2)
const calls = Number(arg)
const CONCURRENCY = 16
const ROUNDS = 5

function cpuMicros() {
  const { user, system } = process.cpuUsage()
  return user + system
}

async function measure(work) {
  global.gc?.()
  const cpu = cpuMicros()
  const wall = performance.now()
  await work()
  return { wall: performance.now() - wall, cpu: (cpuMicros() - cpu) / 1000 }
}

const median = (values) => {
  const sorted = [...values].sort((a, b) => a - b)
  const mid = sorted.length >> 1
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2
}

async function workflowAgainstFanout(count) {
  const harness = await createHarness({
    script: [
      { when: { prompt: '^child' }, reply: [{ text: 'child done' }] },
      { when: { prompt: '^fan' }, reply: [{ calls: Array.from({ length: count }, () => ({ tool: 'subagent', args: { description: 'd', prompt: 'child' } })) }, { text: 'ok' }] },
    ],
  })
  await harness.plugin(SubagentService, { tree: { maxConcurrent: CONCURRENCY, maxQueued: count } })
  await harness.plugin(SpawnPlugin, {})
  await harness.plugin(SubagentToolPlugin, { provider: 'spawn', enableRunInBackground: false })

  const viaWorkflow = async () => {
    const root = await harness.agent({ meta: { origin: 'workflow' } })
    const journal = new Journal(root.session)
    journal.begin('bench.mjs', '')
    const runner = new WorkflowRunner(harness.ctx, root, journal, { toolSettings: {}, treeCap: CONCURRENCY, warn: () => {} })
    const items = Array.from({ length: count }, (_, index) => index)
    const outcome = await runner.run({ file: 'bench.mjs', source: '', hash: '', options: {}, run: ({ agent, parallel }) => parallel(items, (index) => agent('spawn', `child ${index}`), { concurrency: CONCURRENCY }) })
    if (outcome.error !== undefined || outcome.calls.run !== count) throw new Error(`the workflow ended ${String(outcome.error)} after ${outcome.calls.run} calls`)
    journal.finish('done', 'completed')
    await root.dispose()
  }
  const viaFanout = async () => {
    const parent = await harness.agent()
    const result = await parent.followup('fan out')
    if (result.reason !== 'completed') throw new Error(`the fan-out turn ended ${result.reason}: ${result.error}`)
    const failed = parent.session.events().filter((event) => event.type === 'tool/result' && event.result.isError).length
    if (failed > 0) throw new Error(`${failed} children of the fan-out failed`)
    await parent.dispose()
  }

  // One warm-up of each, then alternating rounds.
  await viaWorkflow()
  await viaFanout()
  const workflow = []
  const fanout = []
  for (let round = 0; round < ROUNDS; round++) {
    workflow.push(await measure(viaWorkflow))
    fanout.push(await measure(viaFanout))
  }
  if (harness.ctx.agents.list().length !== 0) throw new Error('children leaked')
  await harness.dispose()
  const workflowCpu = median(workflow.map((spent) => spent.cpu))
  const fanoutCpu = median(fanout.map((spent) => spent.cpu))
  return {
    [`workflow_${count}_c${CONCURRENCY}_ms`]: median(workflow.map((spent) => spent.wall)),
    [`workflow_${count}_c${CONCURRENCY}_cpu_ms`]: workflowCpu,
    [`fanout_${count}_c${CONCURRENCY}_ms`]: median(fanout.map((spent) => spent.wall)),
    [`fanout_${count}_c${CONCURRENCY}_cpu_ms`]: fanoutCpu,
    [`workflow_${count}_per_call_overhead_us`]: ((workflowCpu - fanoutCpu) * 1000) / count,
  }
}

const scenarios = { workflowAgainstFanout }
const run = scenarios[name]
if (!run) {
  console.error(`unknown scenario ${name}; known: ${Object.keys(scenarios).join(', ')}`)
  process.exit(2)
}
process.stdout.write(`${JSON.stringify(await run(calls))}\n`)
