// Queue benchmark scenarios in a fresh process, like scenario.js: prints one JSON object.
// Redis is a real redis-server on a Unix socket (testkit); workers are real `dsh worker`
// processes playing a scripted model; the parent is an in-process harness.
//   queueRoundTrip N   one delegation's round trip (start, answer, dispose) through an
//                      in-process spawn child, an A2A worker and the queue (one worker), N of each
//   queueFanout N      N delegations at once over three workers against over one; each
//                      job's model answers after 500 ms, each worker runs 10 jobs at once
//   queueThroughput N  N trivial delegations at once over three workers (50 jobs each at
//                      once): jobs per second, enqueue to collected result
import { spawn } from 'node:child_process'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { createHarness } from '@dsh/testkit/harness'
import { startRedis } from '@dsh/testkit/redis'
import { text } from '@dsh/llm'
import { SubagentService } from '@dsh/subagent'
import { SpawnPlugin } from '@dsh/subagent-spawn'
import { A2aPlugin } from '@dsh/subagent-a2a'
import { QueuePlugin } from '@dsh/subagent-queue'

const here = dirname(fileURLToPath(import.meta.url))
const dshMain = join(here, '../packages/cli/dsh/dist/main.js')
const [name, arg] = process.argv.slice(2)
const scratch = mkdtempSync(join(tmpdir(), 'dsh-bench-queue-'))
const children = []
const redis = await startRedis()
process.env.DSH_REDIS_URL = redis.url

function script(file, body) {
  const path = join(scratch, file)
  writeFileSync(path, body)
  return path
}

/** A long-lived dsh process; resolves with its first stdout line once it prints one. */
function startProcess(args) {
  const child = spawn(process.execPath, [dshMain, ...args, '--session-dir', mkdtempSync(join(scratch, 'sessions-'))], { env: { ...process.env, DSH_HOME: scratch }, stdio: ['ignore', 'pipe', 'pipe'] })
  children.push(child)
  return new Promise((resolve, reject) => {
    let out = ''
    let err = ''
    child.stdout.on('data', (chunk) => {
      out += chunk
      if (out.includes('\n')) resolve(out.trim())
    })
    child.stderr.on('data', (chunk) => (err += chunk))
    child.on('exit', (code) => reject(new Error(`dsh ${args[0]} exited ${code}: ${err}`)))
  })
}

const startWorker = (model, concurrency, queue) => startProcess(['worker', '--queue', queue, '--concurrency', String(concurrency), '--model', `scripted:${model}`])

async function parentWith(plugins) {
  const harness = await createHarness({ script: [{ reply: [{ text: 'unused' }] }] })
  await harness.plugin(SubagentService)
  for (const [plugin, config] of plugins) await harness.plugin(plugin, config)
  return { harness, parent: await harness.agent() }
}

async function delegate({ harness, parent }, provider, prompt) {
  const run = await harness.ctx.subagents.start(provider, { prompt: [text(prompt)], parent, signal: new AbortController().signal })
  const result = await run.result
  await run.dispose()
  if (result.stopReason !== 'completed') throw new Error(`${provider} run ended ${result.stopReason}: ${result.diagnostic}`)
}

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
  await Promise.all(children.map((child) => new Promise((resolve) => (child.exitCode !== null ? resolve() : (child.once('exit', resolve), child.kill('SIGTERM'))))))
  await redis.stop()
  rmSync(scratch, { recursive: true, force: true })
}
