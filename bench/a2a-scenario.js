// A2A benchmark scenarios in a fresh process, like scenario.js: prints one JSON object.
// Workers are real `dsh a2a serve` processes on 127.0.0.1 playing a scripted model.
//   a2aRoundTrip N  one delegation's round trip (start, answer, dispose) through an
//                   in-process spawn child, an ACP child (a `dsh acp` process per
//                   delegation) and an A2A worker (one long-lived process), N of each
//   a2aFanout N     N delegations at once over three workers against over one; each
//                   task's model answers after 500 ms, each worker runs 10 tasks at once
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { SpawnPlugin } from '@dsh/subagent-spawn'
import { AcpPlugin } from '@dsh/subagent-acp'
import { A2aPlugin } from '@dsh/subagent-a2a'
import { delegate, dshMain, DshProcesses, parentWith } from './delegation-setup.js'

const [name, arg] = process.argv.slice(2)
const scratch = mkdtempSync(join(tmpdir(), 'dsh-bench-a2a-'))
const workers = new DshProcesses(scratch)

function script(name, body) {
  const file = join(scratch, name)
  writeFileSync(file, body)
  return file
}

/** A `dsh a2a serve` process on a free loopback port; resolves with its URL once it serves. */
const startWorker = (model, maxTasks) => workers.start(['a2a', 'serve', '--port', '0', '--max-tasks', String(maxTasks), '--model', `scripted:${model}`])

async function a2aRoundTrip(count) {
  const child = script('child.yml', '- reply: [{ text: "child done" }]\n')
  const url = await startWorker(child, 4)
  const setup = await parentWith([
    [SpawnPlugin, {}],
    [AcpPlugin, { command: process.execPath, args: [dshMain, 'acp', '--model', `scripted:${child}`] }],
    [A2aPlugin, { urls: [url] }],
  ])
  const figures = {}
  for (const provider of ['spawn', 'acp', 'a2a']) {
    await delegate(setup, provider, 'warm up')
    const wall = performance.now()
    for (let i = 0; i < count; i++) await delegate(setup, provider, `task ${i}`)
    figures[`roundtrip_${provider}_ms`] = (performance.now() - wall) / count
  }
  await setup.harness.dispose()
  return figures
}

async function a2aFanout(count) {
  const model = script('slow.yml', '- reply: [{ text: "done", delay_ms: 500 }]\n')
  const urls = await Promise.all([1, 2, 3].map(() => startWorker(model, 10)))
  const figures = {}
  for (const [label, list] of [['3_workers', urls], ['1_worker', urls.slice(0, 1)]]) {
    const setup = await parentWith([[A2aPlugin, { urls: list }]])
    await delegate(setup, 'a2a', 'warm up')
    const wall = performance.now()
    await Promise.all(Array.from({ length: count }, (_, i) => delegate(setup, 'a2a', `task ${i}`)))
    figures[`a2a_fanout_${count}_${label}_ms`] = performance.now() - wall
    await setup.harness.dispose()
  }
  return figures
}

const scenarios = { a2aRoundTrip, a2aFanout }
const run = scenarios[name]
if (!run) {
  console.error(`unknown scenario ${name}; known: ${Object.keys(scenarios).join(', ')}`)
  process.exit(2)
}
try {
  const figures = await run(Number(arg))
  process.stdout.write(`${JSON.stringify(figures)}\n`)
} finally {
  await workers.stop()
  rmSync(scratch, { recursive: true, force: true })
}
