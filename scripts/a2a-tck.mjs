#!/usr/bin/env node
/**
 * npm run tck: the official A2A conformance kit (../shared/a2a-tck/run.sh, protocol 1.0)
 * against a real `dsh a2a serve`, once per binding its card declares, on a keyless
 * scripted model and a free port. Prints the kit's failures and MUST figure per binding,
 * and fails (exit 1) when a figure is below the floor the A2A server's README states
 * (its "Conformance" table), or names no floor for a declared binding; exit 2 when the
 * kit cannot run at all (no kit, no Python packages).
 *
 * Not part of `npm test`: the kit lives outside this repository and installs Python
 * packages into a venv (pip, the network), which a clean CI machine need not have; a run
 * takes minutes. Run it after `npm run build` (this script builds first through npm).
 *
 *   npm run tck [-- --kit PATH/run.sh] [-- --binding jsonrpc]
 */
import { spawn } from 'node:child_process'
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
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
const script = join(work, 'model.yml')
// Every context answers in text; a context the kit continues takes the next reply.
writeFileSync(script, ['- reply:', ...Array.from({ length: 100 }, (_, index) => `    - text: "Reply ${index + 1} from dsh."`)].join('\n'))

const server = await serve(work, script)
let failed = false
try {
  const card = await (await fetch(`${server.url}/.well-known/agent-card.json`)).json()
  const declared = [...new Set(card.supportedInterfaces.map((entry) => BINDINGS[entry.protocolBinding] ?? entry.protocolBinding))]
  const bindings = values.binding ?? declared
  for (const binding of bindings) {
    const { code, output } = await run(values.kit, [server.url, binding])
    process.stdout.write(output)
    const must = /^TCK MUST ([\d.]+)%/m.exec(output)?.[1]
    if (code !== 0 || must === undefined) {
      console.error(`a2a-tck: the kit did not run for ${binding} (exit ${code})`)
      process.exitCode = 2
      failed = true
      continue
    }
    const unmet = mustNotMet()
    if (unmet !== undefined) console.log(`a2a-tck: ${binding}: MUST ${unmet.passed} of ${unmet.counted} met; not met: ${unmet.failed.join(', ') || 'none'}`)
    const floor = floors.get(binding)
    if (floor === undefined) {
      console.error(`a2a-tck: ${binding}: MUST ${must}%, but ${readme} states no floor for it; add it to the Conformance table`)
      failed = true
    } else if (Number(must) < floor) {
      console.error(`a2a-tck: ${binding}: MUST ${must}%, below the ${floor}% the README states`)
      failed = true
    } else {
      console.log(`a2a-tck: ${binding}: MUST ${must}% (the README states at least ${floor}%)`)
    }
  }
} finally {
  await server.stop()
  rmSync(work, { recursive: true, force: true })
}
if (failed) process.exitCode ||= 1

/** `dsh a2a serve` on a free port, with the kit's webhooks allowed: its receiver on loopback, and the URL its config tests only store. */
async function serve(dir, model) {
  const child = spawn(
    process.execPath,
    [
      join(repo, 'packages/cli/dsh/bin/dsh.cjs'), 'a2a', 'serve', '--port', '0', '--model', `scripted:${model}`, '--session-dir', join(dir, 'sessions'),
      '--webhook-allow', 'http://localhost:*', '--webhook-allow', 'http://127.0.0.1:*', '--webhook-allow-network', '127.0.0.1', '--webhook-allow-network', '::1',
      '--webhook-allow', 'https://example.com/tck-push-webhook',
    ],
    { cwd: repo, env: { ...process.env, DSH_HOME: join(dir, 'home') }, stdio: ['ignore', 'pipe', 'inherit'] },
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

/** The MUST requirements of the kit's last report (the binding just run): how many were met, and which were not. */
function mustNotMet() {
  try {
    const report = JSON.parse(readFileSync(join(process.env.TCK_HOME ?? '/tmp/a2a-tck', 'report.json'), 'utf8'))
    const musts = Object.entries(report.per_requirement).filter(([, entry]) => entry.level === 'MUST')
    const passed = musts.filter(([, entry]) => entry.status === 'PASS').length
    const failed = musts.filter(([, entry]) => entry.status === 'FAIL').map(([id]) => id)
    return { passed, counted: passed + failed.length, failed }
  } catch {
    return undefined
  }
}

/** The README's Conformance table: `| \`binding\` | N% | …` rows, the MUST figure each binding must reach. */
function readFloors(text) {
  const floors = new Map()
  for (const match of text.matchAll(/^\| `(\w+)` \| ([\d.]+)% \|/gm)) floors.set(match[1], Number(match[2]))
  return floors
}
