// Start-up benchmark in a fresh process, like scenario.js: prints one JSON object.
//   startup N  N interleaved rounds (after one warm-up round) of:
//              - `node -e 0`, bare Node's start and exit;
//              - `dsh run` of a one-reply script, fresh session directory, through the
//                shipped executable (packages/cli/dsh/dist/bundle/dsh.cjs);
//              - a parent `dsh run` whose script delegates once to a `dsh acp` child, and
//                the same run (same composition) whose script calls a no-op tool instead.
// Every command runs as its own process and is timed wall-clock from spawn to exit. The
// warm-up round leaves the code cache warm, as it is for a user after the first run. With
// NODE_EXTRA_CA_CERTS set, `node -e 0` and `dsh run` are also timed without it (see `extraCa`).
import { spawnSync } from 'node:child_process'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

const here = dirname(fileURLToPath(import.meta.url))
const dsh = join(here, '../packages/cli/dsh/bin/dsh.cjs')
const [name, arg] = process.argv.slice(2)
if (name !== 'startup') throw new Error(`bench/startup.js: unknown scenario "${name}" (the only one is startup)`)
const rounds = Number(arg ?? 10)
const scratch = mkdtempSync(join(tmpdir(), 'dsh-bench-startup-'))

function file(fileName, body) {
  const path = join(scratch, fileName)
  writeFileSync(path, body)
  return path
}

const hello = file('hello.yml', '- reply:\n    - text: "hello"\n')
const child = file('child.yml', '- reply:\n    - text: "Paris."\n')
const delegating = file('delegating.yml', [
  '- when: { depth: 0 }',
  '  reply:',
  '    - call: { tool: subagent_acp, args: { description: "ask", prompt: "capital of France?" } }',
  '    - text: "done"',
  '',
].join('\n'))
const noOp = file('no-op.yml', [
  '- when: { depth: 0 }',
  '  reply:',
  '    - call: { tool: task_list, args: {} }',
  '    - text: "done"',
  '',
].join('\n'))
const config = file('acp.yml', [
  '- id: subagent-acp',
  '  name: "@dsh/subagent-acp"',
  `  config: { providerName: acp, command: ${JSON.stringify(process.execPath)}, args: [${JSON.stringify(dsh)}, acp, --model, ${JSON.stringify(`scripted:${child}`)}], permission: reject }`,
  '- id: tool-subagent-acp',
  '  name: "@dsh/tool-subagent"',
  '  config: { provider: acp, toolName: subagent_acp }',
  '',
].join('\n'))

const env = { ...process.env, DSH_HOME: scratch }
delete env.DSH_CODE_CACHE
delete env.DEEPSEEK_API_KEY
delete env.OPENAI_API_KEY
// A CA file named here is read by every Node process as it starts (on the machines we
// measure on, 0.2 MB of certificates: 35-40 ms, more than Node's own start). The `dsh acp`
// child never has it (the provider passes a base environment), so its ratio is also given
// against a Node that does not read it, and so is `dsh run`'s.
const extraCa = env.NODE_EXTRA_CA_CERTS !== undefined
const envWithoutExtraCa = { ...env }
delete envWithoutExtraCa.NODE_EXTRA_CA_CERTS

/** Wall milliseconds of one process from spawn to exit; a failed command fails the benchmark. */
function timed(command, args, withEnv = env) {
  const started = process.hrtime.bigint()
  const result = spawnSync(command, args, { cwd: scratch, env: withEnv, encoding: 'utf8' })
  const ms = Number(process.hrtime.bigint() - started) / 1e6
  if (result.status !== 0) throw new Error(`${[command, ...args].join(' ')} exited ${result.status}: ${result.stderr}`)
  return ms
}

const dshRunArgs = (script, ...extra) => [dsh, 'run', ...extra, '--model', `scripted:${script}`, '--session-dir', mkdtempSync(join(scratch, 'sessions-')), '--quiet', 'go']
// The plain run and the runs composing the acp provider keep code caches of their own, as
// two users' would: a cache grows with the modules its runs load (src/launch/code-cache.ts),
// and one grown by the provider's runs costs a plain run about 7 ms more to restore.
const plainCache = { ...env, DSH_CODE_CACHE: join(scratch, 'cache-plain') }
const plainCacheWithoutExtraCa = { ...plainCache }
delete plainCacheWithoutExtraCa.NODE_EXTRA_CA_CERTS
const dshRun = (script, ...extra) => timed(process.execPath, dshRunArgs(script, ...extra), extra.length > 0 ? env : plainCache)

const samples = { node: [], run: [], parentWithChild: [], parentWithNoOp: [], nodeWithoutExtraCa: [], runWithoutExtraCa: [] }
try {
  for (let round = -1; round < rounds; round++) {
    const node = timed(process.execPath, ['-e', '0'])
    const run = dshRun(hello)
    const parentWithChild = dshRun(delegating, '--config', config)
    const parentWithNoOp = dshRun(noOp, '--config', config)
    const nodeWithoutExtraCa = extraCa ? timed(process.execPath, ['-e', '0'], envWithoutExtraCa) : node
    const runWithoutExtraCa = extraCa ? timed(process.execPath, dshRunArgs(hello), plainCacheWithoutExtraCa) : run
    if (round < 0) continue
    samples.node.push(node)
    samples.run.push(run)
    samples.parentWithChild.push(parentWithChild)
    samples.parentWithNoOp.push(parentWithNoOp)
    samples.nodeWithoutExtraCa.push(nodeWithoutExtraCa)
    samples.runWithoutExtraCa.push(runWithoutExtraCa)
  }
} finally {
  rmSync(scratch, { recursive: true, force: true })
}

const median = (values) => {
  const sorted = [...values].sort((a, b) => a - b)
  const mid = sorted.length >> 1
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2
}
const node = median(samples.node)
const run = median(samples.run)
const added = median(samples.parentWithChild.map((ms, i) => ms - samples.parentWithNoOp[i]))
const nodeWithoutExtraCa = median(samples.nodeWithoutExtraCa)
const runWithoutExtraCa = median(samples.runWithoutExtraCa)
process.stdout.write(`${JSON.stringify({
  startup_node_ms: node,
  startup_dsh_run_ms: run,
  startup_dsh_run_x_node: run / node,
  acp_child_added_ms: added,
  acp_child_added_x_node: added / node,
  // The two runs the difference is taken of: what a user waits for with the provider used, and composed but unused.
  acp_parent_with_child_ms: median(samples.parentWithChild),
  acp_parent_provider_unused_ms: median(samples.parentWithNoOp),
  ...(extraCa && {
    startup_node_no_extra_ca_ms: nodeWithoutExtraCa,
    startup_dsh_run_no_extra_ca_ms: runWithoutExtraCa,
    startup_dsh_run_no_extra_ca_x_node: runWithoutExtraCa / nodeWithoutExtraCa,
    acp_child_added_x_node_no_extra_ca: added / nodeWithoutExtraCa,
  }),
})}\n`)
