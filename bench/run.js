// Runs every benchmark scenario in fresh processes and prints the median of each figure.
//   npm run bench            a table
//   npm run bench -- --json  one {"name","unit","value"} object a line
//   npm run bench -- --only=fanoutTraced,startup   only the scenarios named
//   npm run bench -- --quiet-wait-s=0              do not wait for the machine to be quiet (default: up to 8 s before each process)
// Scenarios live in bench/scenario.js (A2A ones in bench/a2a-scenario.js, queue ones in bench/queue-scenario.js, dsh ui's in bench/ui.js, start-up in bench/startup.js, live progress in bench/progress.js, tracing on against off in bench/tracing.js, approvals in bench/approvals.js, the file tools in bench/files.js, hooks in bench/hooks.js, MCP in bench/mcp.js); bench/README.md says what each figure should be and why.
import { execFileSync } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

const here = dirname(fileURLToPath(import.meta.url))
const json = process.argv.includes('--json')
const runsArg = process.argv.find((arg) => arg.startsWith('--runs='))
const runs = runsArg ? Number(runsArg.slice('--runs='.length)) : 5
const onlyArg = process.argv.find((arg) => arg.startsWith('--only='))
const only = onlyArg ? new Set(onlyArg.slice('--only='.length).split(',')) : undefined

const plan = [
  { scenario: 'delegation', arg: 6000 },
  { scenario: 'delegationPersisted', arg: 6000 },
  { scenario: 'delegationProgress', arg: 6000 },
  { scenario: 'delegationApprovals', arg: 6000 },
  { scenario: 'fanout', arg: 100 },
  { scenario: 'fanoutPersisted', arg: 100 },
  { scenario: 'fanout', arg: 1000 },
  { scenario: 'liveChildren', arg: 1000 },
  { scenario: 'queuedChildren', arg: 10000 },
  { scenario: 'fork', arg: 10 },
  { scenario: 'fork', arg: 1000 },
  { scenario: 'fork', arg: 100000 },
  { scenario: 'a2aRoundTrip', arg: 5, file: 'a2a-scenario.js' },
  { scenario: 'a2aFanout', arg: 30, file: 'a2a-scenario.js' },
  { scenario: 'queueRoundTrip', arg: 5, file: 'queue-scenario.js' },
  { scenario: 'queueFanout', arg: 30, file: 'queue-scenario.js' },
  { scenario: 'queueThroughput', arg: 1000, file: 'queue-scenario.js' },
  { scenario: 'uiRender', arg: 1000, file: 'ui.js' },
  { scenario: 'uiAnswer', arg: 200, file: 'ui.js' },
  { scenario: 'startup', arg: 8, file: 'startup.js' },
  { scenario: 'progress', arg: 2000, file: 'progress.js' },
  { scenario: 'fanoutTraced', arg: 100, file: 'tracing.js' },
  { scenario: 'fanoutTraced', arg: 1000, file: 'tracing.js' },
  { scenario: 'approvalRoundTrip', arg: 5000, file: 'approvals.js' },
  { scenario: 'approvalAcpRoundTrip', arg: 20, file: 'approvals.js' },
  { scenario: 'filesRead', arg: 2000, file: 'files.js' },
  { scenario: 'filesGrep', arg: 50000, file: 'files.js' },
  { scenario: 'hookedToolCall', arg: 2000, file: 'hooks.js' },
  { scenario: 'workflowAgainstFanout', arg: 1000, file: 'workflow.js' },
  { scenario: 'mcp', arg: 2000, file: 'mcp.js' },
]

const units = [
  [/_x_node(_no_extra_ca)?$/, 'x'],
  [/_x_rg$/, 'x'],
  [/_us$/, 'us'],
  [/_ns$/, 'ns'],
  [/_ms$/, 'ms'],
  [/_kb$/, 'KB'],
  [/_events$/, 'events'],
  [/_spans$/, 'spans'],
  [/_per_s$/, '/s'],
]
const unitOf = (name) => units.find(([pattern]) => pattern.test(name))?.[1] ?? ''

// The machine is shared: before each process, wait (at most --quiet-wait-s, default 8 s) until
// other processes use under 0.3 of a core, as the anchor benchmarks' runner does, so the two
// are measured alike; what others used in the last second is kept and printed per scenario.
const quietArg = process.argv.find((arg) => arg.startsWith('--quiet-wait-s='))
const quietWaitMs = (quietArg ? Number(quietArg.slice('--quiet-wait-s='.length)) : 8) * 1000
const busyTicks = () => {
  const [, user, nice, system, , , irq, softirq] = readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/).map(Number)
  return user + nice + system + irq + softirq
}
const pause = (ms) => Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms)
function othersCores() {
  if (quietWaitMs <= 0) return undefined
  const started = Date.now()
  for (;;) {
    const before = busyTicks()
    pause(1000)
    const cores = (busyTicks() - before) / 100
    if (cores < 0.3 || Date.now() - started >= quietWaitMs) return cores
  }
}

const samples = new Map()
const others = []
for (const { scenario, arg, file = 'scenario.js' } of plan.filter(({ scenario }) => !only || only.has(scenario))) {
  for (let i = 0; i < runs; i++) {
    const cores = othersCores()
    if (cores !== undefined) others.push(cores)
    const out = execFileSync(process.execPath, ['--expose-gc', join(here, file), scenario, String(arg)], { encoding: 'utf8' })
    const figures = JSON.parse(out.trim().split('\n').at(-1))
    for (const [name, value] of Object.entries(figures)) samples.set(name, [...(samples.get(name) ?? []), value])
  }
  if (!json) process.stderr.write(`  ran ${scenario} ${arg} x${runs}${others.length > 0 ? ` (others before each: ${others.splice(0).map((cores) => cores.toFixed(2)).join(', ')} cores)` : ''}\n`)
}

const median = (values) => {
  const sorted = [...values].sort((a, b) => a - b)
  const mid = sorted.length >> 1
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2
}

const rows = [...samples].map(([name, values]) => ({ name, unit: unitOf(name), value: median(values), min: Math.min(...values), max: Math.max(...values) }))
if (json) {
  for (const { name, unit, value } of rows) process.stdout.write(`${JSON.stringify({ name, unit, value: Number(value.toFixed(3)) })}\n`)
} else {
  const fmt = (value) => (value >= 100 ? value.toFixed(0) : value.toFixed(2))
  process.stdout.write(`median of ${runs} fresh processes each (min-max)\n`)
  for (const { name, unit, value, min, max } of rows) {
    process.stdout.write(`${name.padEnd(30)} ${fmt(value).padStart(10)} ${unit.padEnd(6)} (${fmt(min)}-${fmt(max)})\n`)
  }
}
