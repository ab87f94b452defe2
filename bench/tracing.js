// Tracing's cost, in a fresh process: the fan-out of bench/scenario.js with @dsh/tracing off
// and on (exporting to the testkit's OTLP receiver on 127.0.0.1), and what each span costs.
// Prints one JSON object; bench/run.js repeats it in new processes and takes medians.
import { createHarness } from '@dsh/testkit/harness'
import { fork } from 'node:child_process'
import { SubagentService } from '@dsh/subagent'
import { SpawnPlugin } from '@dsh/subagent-spawn'
import { SubagentToolPlugin } from '@dsh/tool-subagent'
import * as tracing from '@dsh/tracing'

const [name, arg] = process.argv.slice(2)

function cpuMicros() {
  const { user, system } = process.cpuUsage()
  return user + system
}

const repeat = (count, make) => Array.from({ length: count }, make)

/**
 * The testkit's OTLP receiver in a process of its own, so that decoding what arrives is
 * not counted as the traced process's work. `spans()` asks it how many it has.
 */
async function receiverProcess() {
  const child = fork(new URL('./otlp-receiver.js', import.meta.url), [], { stdio: ['ignore', 'ignore', 'inherit', 'ipc'] })
  const origin = await new Promise((resolve) => child.once('message', resolve))
  return {
    origin,
    spans: () => new Promise((resolve) => {
      child.once('message', resolve)
      child.send('count')
    }),
    close: () => new Promise((resolve) => {
      child.once('exit', resolve)
      child.kill()
    }),
  }
}

/**
 * `turns` fan-out turns of `count` children each (after three warm-up turns), then the
 * harness's disposal, which for a traced one is the last flush: tracing's export work is
 * counted wherever it happens. Returns the mean wall and CPU per turn, and the spans sent.
 */
async function fanoutTurns(count, traced) {
  const otlp = traced ? await receiverProcess() : undefined
  const harness = await createHarness({
    script: [
      { when: { prompt: '^child' }, reply: [{ text: 'child done' }] },
      { when: { prompt: '^fan' }, reply: [{ calls: repeat(count, () => ({ tool: 'subagent', args: { description: 'd', prompt: 'child' } })) }, { text: 'ok' }] },
    ],
  })
  await harness.plugin(SubagentService)
  await harness.plugin(SpawnPlugin, {})
  await harness.plugin(SubagentToolPlugin, { provider: 'spawn', enableRunInBackground: false })
  if (otlp) await harness.plugin(tracing, { endpoint: otlp.origin })
  const fanOnce = async () => {
    const parent = await harness.agent()
    const result = await parent.followup('fan out')
    if (result.reason !== 'completed') throw new Error(`turn ended ${result.reason}: ${result.error}`)
    await parent.dispose()
  }
  for (let i = 0; i < 3; i++) await fanOnce()
  global.gc?.()
  const turns = count >= 1000 ? 5 : 20
  const cpu = cpuMicros()
  const wall = performance.now()
  for (let i = 0; i < turns; i++) await fanOnce()
  const turnsWall = performance.now() - wall
  await harness.dispose()
  const spent = { wall: turnsWall / turns, cpu: (cpuMicros() - cpu) / turns / 1000 }
  const spans = otlp ? await otlp.spans() : 0
  await otlp?.close()
  // Root turn, its two model requests and `count` tool calls; each child's turn and request.
  const perTurn = 3 + count * 3
  // A fan-out faster than the collector takes spans overflows the batch queue: those are dropped (and the tracer says so), never waited for.
  const dropped = otlp ? perTurn * (turns + 3) - spans : 0
  return { ...spent, perTurn, dropped }
}

async function fanoutTraced(count) {
  const off = await fanoutTurns(count, false)
  const on = await fanoutTurns(count, true)
  return {
    [`fanout_${count}_untraced_ms`]: off.wall,
    [`fanout_${count}_traced_ms`]: on.wall,
    [`fanout_${count}_untraced_cpu_ms`]: off.cpu,
    [`fanout_${count}_traced_cpu_ms`]: on.cpu,
    [`tracing_${count}_cpu_per_span_us`]: ((on.cpu - off.cpu) * 1000) / on.perTurn,
    [`tracing_${count}_dropped_spans`]: on.dropped,
  }
}

const scenarios = { fanoutTraced }
const run = scenarios[name]
if (!run) {
  console.error(`unknown scenario ${name}; known: ${Object.keys(scenarios).join(', ')}`)
  process.exit(2)
}
process.stdout.write(`${JSON.stringify(await run(Number(arg)))}\n`)
