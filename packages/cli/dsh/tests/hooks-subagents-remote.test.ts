/**
 * SubagentStop for the whole tree across a worker, through the built CLIs on a scripted
 * model: the root's hook (the user's own config) writes a record per agent that ends, for
 * the remote child and for a spawn grandchild running below it in a `dsh a2a serve` worker
 * (its task's status updates name its descendants, `metadata.dsh.descendants`) and in a
 * `dsh worker` of a queue (its job's progress names them, `descendants`). Neither worker has
 * hooks of its own: the root's fire for what they named.
 */
import { spawn } from 'node:child_process'
import { mkdirSync, readdirSync, readFileSync, realpathSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { startRedis } from '@dsh/testkit/redis'
import { dshBin, repoRoot, runDsh, tempDir } from './cli.js'
import { serve } from './a2a-serve-process.js'
import { until } from './processes.js'

const cleanups: Array<() => Promise<void>> = []
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
})

function write(path: string, lines: string[]): string {
  writeFileSync(path, `${lines.join('\n')}\n`)
  return path
}

/** The worker's script: its task delegates to a spawn grandchild, which answers. */
function workerScript(dir: string): string {
  return write(join(dir, 'worker.yml'), [
    '- when: { prompt: "^grand work" }',
    '  reply: [{ text: "granded" }]',
    '- reply:',
    '    - call: { tool: subagent, args: { description: grand, prompt: "grand work" } }',
    '    - text: "worker: {{last_tool_result}}"',
  ])
}

/** Run the root (a SubagentStop hook writing a file per run) delegating through `tool`; the records, as `agent_path | stop_reason`. */
async function rootStops(dir: string, plugin: string[], tool: string, env: NodeJS.ProcessEnv): Promise<string[]> {
  const log = join(dir, 'stops')
  mkdirSync(log)
  const hook = `cat > "$(mktemp -p ${log})"`
  const config = write(join(dir, 'root.yml'), [
    '- name: "@dsh/hooks"',
    '  config:',
    '    hooks:',
    `      SubagentStop: [{ hooks: [{ type: command, command: ${JSON.stringify(hook)} }] }]`,
    ...plugin,
  ])
  const script = write(join(dir, 'root-script.yml'), ['- when: { depth: 0 }', '  reply:', `    - call: { tool: ${tool}, args: { description: remote, prompt: "remote work" } }`, '    - text: "root: {{last_tool_result}}"'])
  const result = await runDsh(['run', '--config', config, '--model', `scripted:${script}`, '--session-dir', join(dir, 'sessions'), '--quiet', 'go'], { cwd: dir, env: { DSH_HOME: join(dir, 'home'), ...env }, timeoutMs: 90_000 })
  expect(result.code, result.stderr).toBe(0)
  expect(result.stdout).toContain('granded')
  const stops = readdirSync(log).map((name) => JSON.parse(readFileSync(join(log, name), 'utf8')) as Record<string, unknown>)
  for (const stop of stops) {
    expect(stop.hook_event_name).toBe('SubagentStop')
    expect(typeof stop.agent_id).toBe('string')
  }
  return stops.map((stop) => `${String(stop.agent_path)} | ${String(stop.stop_reason)}`).sort()
}

describe('SubagentStop hooks at the root, for agents below a worker', () => {
  it("record an A2A worker's spawn grandchild with its path through the worker", async () => {
    const dir = realpathSync(tempDir())
    const served = await serve(['--model', `scripted:${workerScript(dir)}`, '--session-dir', join(dir, 'worker-sessions')])
    const seen = await rootStops(dir, ['- id: subagent-a2a', '  name: "@dsh/subagent-a2a"', `  config: { urls: [${served.url}] }`, '- id: tool-subagent-a2a', '  name: "@dsh/tool-subagent"', '  config: { provider: a2a, toolName: subagent_a2a }'], 'subagent_a2a', {})
    expect(seen).toEqual(['dsh/a2a "remote" | completed', 'dsh/a2a "remote"/spawn "grand" | completed'])
  })

  it("record a queue worker's spawn grandchild with its path through the worker", async () => {
    const server = await startRedis()
    cleanups.push(() => server.stop())
    const dir = realpathSync(tempDir())
    const worker = spawn(process.execPath, [dshBin, 'worker', '--model', `scripted:${workerScript(dir)}`, '--session-dir', join(dir, 'worker-sessions')], {
      cwd: repoRoot,
      env: { ...process.env, DSH_HOME: tempDir('dsh-home-'), DSH_REDIS_URL: server.url },
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    let stderr = ''
    worker.stderr!.on('data', (chunk: Buffer) => (stderr += chunk))
    worker.stdout!.resume()
    const exited = new Promise<void>((resolve) => worker.on('close', () => resolve()))
    cleanups.push(async () => {
      if (worker.exitCode === null && worker.signalCode === null) worker.kill('SIGKILL')
      await exited
    })
    await until(() => /dsh worker \S+: taking jobs/.test(stderr), () => (worker.exitCode !== null ? `dsh worker exited ${worker.exitCode}: ${stderr}` : undefined))
    const seen = await rootStops(dir, ['- id: subagent-queue', '  name: "@dsh/subagent-queue"', '- id: tool-subagent-queue', '  name: "@dsh/tool-subagent"', '  config: { provider: queue, toolName: subagent_queue }'], 'subagent_queue', { DSH_REDIS_URL: server.url })
    expect(seen).toEqual(['dsh/queue "remote" | completed', 'dsh/queue "remote"/spawn "grand" | completed'])
  })
})
