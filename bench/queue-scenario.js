// Queue benchmark scenarios in a fresh process, like scenario.js: prints one JSON object.
// Redis is a real redis-server on a Unix socket (testkit); workers are real `dsh worker`
// processes playing a scripted model; the parent is an in-process harness.
//   queueRoundTrip N   one delegation's round trip (start, answer, dispose) through an
//                      in-process spawn child, an A2A worker and the queue (one worker), N of each;
//                      and through the queue as a helper (persona, tool list and model in the
//                      job, which the worker checks and applies)
//   queueFanout N      N delegations at once over three workers against over one; each
//                      job's model answers after 500 ms, each worker runs 10 jobs at once
//   queueThroughput N  N trivial delegations at once over three workers (50 jobs each at
//                      once): jobs per second, enqueue to collected result
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { startRedis } from '@dsh/testkit/redis'
import { SpawnPlugin } from '@dsh/subagent-spawn'
import { A2aPlugin } from '@dsh/subagent-a2a'
import { QueuePlugin } from '@dsh/subagent-queue'
import { text } from '@dsh/llm'
import { delegate, DshProcesses, parentWith } from './delegation-setup.js'

const [name, arg] = process.argv.slice(2)
const scratch = mkdtempSync(join(tmpdir(), 'dsh-bench-queue-'))
const children = new DshProcesses(scratch)
const redis = await startRedis()
process.env.DSH_REDIS_URL = redis.url

function script(file, body) {
  const path = join(scratch, file)
  writeFileSync(path, body)
  return path
}

const startProcess = (args) => children.start(args)
const startWorker = (model, concurrency, queue) => startProcess(['worker', '--queue', queue, '--concurrency', String(concurrency), '--model', `scripted:${model}`])

async function queueRoundTrip(count) {
  const child = script('child.yml', '- reply: [{ text: "child done" }]\n')
  const [url] = await Promise.all([startProcess(['a2a', 'serve', '--port', '0', '--max-tasks', '4', '--model', `scripted:${child}`]), startWorker(child, 4, 'roundtrip')])
  const setup = await parentWith([
    [SpawnPlugin, {}],
    [A2aPlugin, { urls: [url] }],
    [QueuePlugin, { queue: 'roundtrip' }],
  ])
  const figures = {}
  for (const provider of ['spawn', 'a2a', 'queue']) {
    await delegate(setup, provider, 'warm up')
    const wall = performance.now()
    for (let i = 0; i < count; i++) await delegate(setup, provider, `task ${i}`)
    figures[`queue_roundtrip_${provider}_ms`] = (performance.now() - wall) / count
  }
  // The same trip as a helper: the job carries a definition the worker resolves and applies.
  const helper = { helper: { name: 'bench', hash: '0000000000000000' }, persona: 'You answer briefly.', toolFilter: { deny: ['bash'] }, agentOptions: { model: `scripted:${child}` } }
  const asHelper = async (prompt) => {
    const run = await setup.harness.ctx.subagents.start('queue', { prompt: [text(prompt)], parent: setup.parent, signal: new AbortController().signal, ...helper })
    const result = await run.result
    await run.dispose()
    if (result.stopReason !== 'completed') throw new Error(`queue helper run ended ${result.stopReason}: ${result.diagnostic}`)
  }
  await asHelper('warm up')
  const wall = performance.now()
  for (let i = 0; i < count; i++) await asHelper(`helper task ${i}`)
  figures.queue_roundtrip_helper_ms = (performance.now() - wall) / count
  figures.queue_roundtrip_x_spawn = figures.queue_roundtrip_queue_ms / figures.queue_roundtrip_spawn_ms
  figures.queue_roundtrip_x_a2a = figures.queue_roundtrip_queue_ms / figures.queue_roundtrip_a2a_ms
  await setup.harness.dispose()
  return figures
}

async function queueFanout(count) {
  const model = script('slow.yml', '- reply: [{ text: "done", delay_ms: 500 }]\n')
  await Promise.all([startWorker(model, 10, 'three'), startWorker(model, 10, 'three'), startWorker(model, 10, 'three'), startWorker(model, 10, 'one')])
  const figures = {}
  for (const [label, queue] of [['3_workers', 'three'], ['1_worker', 'one']]) {
    const setup = await parentWith([[QueuePlugin, { queue }]])
    await delegate(setup, 'queue', 'warm up')
    const wall = performance.now()
    await Promise.all(Array.from({ length: count }, (_, i) => delegate(setup, 'queue', `task ${i}`)))
    figures[`queue_fanout_${count}_${label}_ms`] = performance.now() - wall
    await setup.harness.dispose()
  }
  return figures
}

async function queueThroughput(count) {
  const model = script('quick.yml', '- reply: [{ text: "ok" }]\n')
  await Promise.all([1, 2, 3].map(() => startWorker(model, 50, 'many')))
  const setup = await parentWith([[QueuePlugin, { queue: 'many' }]])
  await delegate(setup, 'queue', 'warm up')
  const wall = performance.now()
  await Promise.all(Array.from({ length: count }, (_, i) => delegate(setup, 'queue', `task ${i}`)))
  const seconds = (performance.now() - wall) / 1000
  await setup.harness.dispose()
  return { [`queue_throughput_${count}_jobs_per_s`]: count / seconds }
}

const scenarios = { queueRoundTrip, queueFanout, queueThroughput }
const run = scenarios[name]
if (!run) {
  console.error(`unknown scenario ${name}; known: ${Object.keys(scenarios).join(', ')}`)
  process.exit(2)
}
try {
  const figures = await run(Number(arg))
  process.stdout.write(`${JSON.stringify(figures)}\n`)
} finally {
  await children.stop()
  await redis.stop()
  rmSync(scratch, { recursive: true, force: true })
}
