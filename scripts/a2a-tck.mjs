#!/usr/bin/env node
/**
 * npm run tck: the official A2A conformance kit (../shared/a2a-tck/run.sh, protocol 1.0)
 * against real `dsh a2a serve` workers on keyless scripted models and free ports, once
 * per binding their card declares and per agent behaviour:
 *
 * - `answers`: every task is answered at once (it completes);
 * - `asks`: the kit's task-creating prompt ("TCK prerequisite task creation") makes the
 *   agent run a command, which the approval broker asks the kit about through
 *   input-required (the default `--permission ask`); the kit's next message on the task
 *   is its answer, and the task completes. Every other prompt is answered at once.
 *
 * The kit expects an agent that completes or waits for input as the message id asks
 * (its own purpose-built agent), and sends the very same text for both; a dsh agent does
 * what its model does, so each requirement's set-up is reached by one behaviour or the
 * other. Each run's MUST figure is the kit's own; the combined figure counts a MUST
 * requirement met when one of the two runs met it (among those either run could test).
 * Prints each run's failures and figures, and fails (exit 1) when a figure is below the
 * floor the A2A server's README states (its "Conformance" table), or names no floor for
 * a declared binding; exit 2 when the kit cannot run at all (no kit, no Python packages).
 *
 * Not part of `npm test`: the kit lives outside this repository and installs Python
 * packages into a venv (pip, the network), which a clean CI machine need not have; a run
 * takes minutes. Run it after `npm run build` (this script builds first through npm).
 *
 *   npm run tck [-- --kit PATH/run.sh] [-- --binding jsonrpc]
 */
import { spawn } from 'node:child_process'
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { parseArgs } from 'node:util'

const repo = resolve(dirname(fileURLToPath(import.meta.url)), '..')
const readme = join(repo, 'packages/a2a/a2a-server/README.md')
const BINDINGS = { JSONRPC: 'jsonrpc', 'HTTP+JSON': 'http_json', GRPC: 'grpc' }

const { values } = parseArgs({
  options: {
    kit: { type: 'string', default: process.env.A2A_TCK_RUN ?? resolve(repo, '../shared/a2a-tck/run.sh') },
    binding: { type: 'string', multiple: true },
  },
})

if (!existsSync(values.kit)) {
  console.error(`a2a-tck: no conformance kit at ${values.kit}; pass --kit PATH/run.sh or set A2A_TCK_RUN`)
  process.exit(2)
}
const floors = readFloors(readFileSync(readme, 'utf8'))

const work = mkdtempSync(join(tmpdir(), 'dsh-a2a-tck-'))
const answering = join(work, 'answers.yml')
// Every context answers in text; a context the kit continues takes the next reply.
const replies = Array.from({ length: 100 }, (_, index) => `    - text: "Reply ${index + 1} from dsh."`)
writeFileSync(answering, ['- reply:', ...replies].join('\n'))
const asking = join(work, 'asks.yml')
writeFileSync(asking, [
  '- when: { prompt: "prerequisite task creation" }',
  '  reply:',
  '    - call: { tool: bash, args: { command: "echo asked" } }',
  '    - text: "The caller answered; the command said: {{last_tool_result}}"',
  '- reply:',
  ...replies,
].join('\n'))
// The kit leaves many tasks waiting for an answer it never sends: they hold a slot each
// until the broker's time limit rejects their request, so the asking worker has more
// slots and a shorter limit than the defaults (still far longer than any test's wait).
const askingConfig = join(work, 'asks-dsh.yml')
writeFileSync(askingConfig, ['- id: approvals', '  name: "@dsh/approvals"', '  config: { timeoutMs: 15000 }'].join('\n'))

const workers = { answers: await serve(join(work, 'answers'), answering, []), asks: await serve(join(work, 'asks'), asking, ['--config', askingConfig, '--max-tasks', '64']) }
let failed = false
try {
  const card = await (await fetch(`${workers.answers.url}/.well-known/agent-card.json`)).json()
  const declared = [...new Set(card.supportedInterfaces.map((entry) => BINDINGS[entry.protocolBinding] ?? entry.protocolBinding))]
  const bindings = values.binding ?? declared
  for (const binding of bindings) {
    const floor = floors.get(binding)
    if (floor === undefined) {
      console.error(`a2a-tck: ${binding}: ${readme} states no floor for it; add it to the Conformance table`)
      failed = true
    }
    const reports = {}
    for (const [behaviour, worker] of Object.entries(workers)) {
      const { code, output } = await run(values.kit, [worker.url, binding])
      process.stdout.write(output)
      const must = /^TCK MUST ([\d.]+)%/m.exec(output)?.[1]
      const report = readReport()
      if (code !== 0 || must === undefined || report === undefined) {
        console.error(`a2a-tck: the kit did not run for ${binding} against the agent that ${behaviour} (exit ${code})`)
        process.exitCode = 2
        failed = true
        continue
      }
      reports[behaviour] = report
      const unmet = mustOf(report)
      console.log(`a2a-tck: ${binding}, the agent that ${behaviour}: MUST ${must}%, ${unmet.passed.length} of ${unmet.counted} met; not met: ${unmet.failed.join(', ') || 'none'}`)
      const least = floor?.[behaviour]
      if (least !== undefined && Number(must) < least) {
        console.error(`a2a-tck: ${binding}, the agent that ${behaviour}: MUST ${must}%, below the ${least}% the README states`)
        failed = true
      }
    }
    if (reports.answers === undefined || reports.asks === undefined) continue
    const combined = combine(mustOf(reports.answers), mustOf(reports.asks))
    const figure = Math.round((1000 * combined.passed.length) / combined.counted) / 10
    console.log(`a2a-tck: ${binding}, combined: MUST ${figure}%, ${combined.passed.length} of ${combined.counted} met; not met by either: ${combined.failed.join(', ') || 'none'}`)
    if (floor !== undefined && figure < floor.combined) {
      console.error(`a2a-tck: ${binding}: combined MUST ${figure}%, below the ${floor.combined}% the README states`)
      failed = true
    } else if (floor !== undefined) console.log(`a2a-tck: ${binding}: combined MUST ${figure}% (the README states at least ${floor.combined}%)`)
  }
} finally {
  await Promise.all(Object.values(workers).map((worker) => worker.stop()))
  rmSync(work, { recursive: true, force: true })
}
if (failed) process.exitCode ||= 1

/** `dsh a2a serve` on a free port with `model`, with the kit's webhooks allowed: its receiver on loopback, and the URL its config tests only store. */
async function serve(dir, model, extra) {
  mkdirSync(dir, { recursive: true })
  const child = spawn(
    process.execPath,
    [
      join(repo, 'packages/cli/dsh/bin/dsh.cjs'), 'a2a', 'serve', '--port', '0', '--model', `scripted:${model}`, '--session-dir', join(dir, 'sessions'),
      // The kit answers its own tasks' input-required: this worker trusts its callers with their approvals.
      '--trust-caller-approvals',
      '--webhook-allow', 'http://localhost:*', '--webhook-allow', 'http://127.0.0.1:*', '--webhook-allow-network', '127.0.0.1', '--webhook-allow-network', '::1',
      '--webhook-allow', 'https://example.com/tck-push-webhook', ...extra,
    ],
    { cwd: dir, env: { ...process.env, DSH_HOME: join(dir, 'home') }, stdio: ['ignore', 'pipe', 'inherit'] },
  )
  const exited = new Promise((done) => child.on('close', done))
  const url = await new Promise((found, failed) => {
    let stdout = ''
    child.stdout.on('data', (chunk) => {
      stdout += chunk
      if (stdout.includes('\n')) found(stdout.trim())
    })
    child.on('close', (code) => failed(new Error(`dsh a2a serve exited ${code} before it served`)))
  })
  return {
    url,
    stop: async () => {
      child.kill('SIGTERM')
      await exited
    },
  }
}

function run(command, args) {
  return new Promise((done) => {
    const child = spawn(command, args, { stdio: ['ignore', 'pipe', 'pipe'] })
    let output = ''
    child.stdout.on('data', (chunk) => (output += chunk))
    child.stderr.on('data', (chunk) => (output += chunk))
    child.on('close', (code) => done({ code, output }))
  })
}

/** The kit's last report (the run just made), or `undefined` when it wrote none. */
function readReport() {
  try {
    return JSON.parse(readFileSync(join(process.env.TCK_HOME ?? '/tmp/a2a-tck', 'report.json'), 'utf8'))
  } catch {
    return undefined
  }
}

/** A report's MUST requirements: those met, those not met, and how many it counted (a requirement it skipped for want of a capability is not counted). */
function mustOf(report) {
  const musts = Object.entries(report.per_requirement).filter(([, entry]) => entry.level === 'MUST')
  const passed = musts.filter(([, entry]) => entry.status === 'PASS').map(([id]) => id)
  const failed = musts.filter(([, entry]) => entry.status === 'FAIL').map(([id]) => id)
  return { passed, failed, counted: passed.length + failed.length }
}

/** Met by either run, among the requirements either run counted. */
function combine(first, second) {
  const passed = [...new Set([...first.passed, ...second.passed])]
  const failed = [...new Set([...first.failed, ...second.failed])].filter((id) => !passed.includes(id))
  return { passed, failed, counted: passed.length + failed.length }
}

/**
 * The README's Conformance table: `| \`binding\` | N% | … | A% … | B% … |` rows, the combined
 * MUST figure each binding must reach and each run's (the agent that answers, the agent
 * that asks).
 */
function readFloors(text) {
  const floors = new Map()
  for (const match of text.matchAll(/^\| `(\w+)` \| ([\d.]+)% \|[^|\n]*\| ([\d.]+)% [^|\n]*\| ([\d.]+)% [^|\n]*\|/gm)) {
    floors.set(match[1], { combined: Number(match[2]), answers: Number(match[3]), asks: Number(match[4]) })
  }
  return floors
}
