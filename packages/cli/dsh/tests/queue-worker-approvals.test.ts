/**
 * A queue cannot ask up the tree: a `dsh worker` whose own config allows what no approval
 * rule decides (`approvals.default: allow`) still runs nothing its root does not allow.
 * The root's default travels in the job's lineage (`approvalDefault`) and the worker's
 * broker applies the stricter of the two, saying so on its log; a root that allows, lets
 * it run. Real processes: the built `dsh run` and `dsh worker`, a real redis-server.
 */
import { spawn } from 'node:child_process'
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { Queue } from 'bullmq'
import { JOB_NAME, jobPayload } from '@dsh/subagent-queue'
import { startRedis, type RedisServer } from '@dsh/testkit/redis'
import { dshBin, repoRoot, runDsh, tempDir } from './cli.js'
import { until } from './processes.js'

const cleanups: Array<() => Promise<void>> = []
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
})

/** `dsh worker` as a real process with `config` (a file), resolved once it takes jobs. */
async function startWorker(server: RedisServer, script: string, config: string): Promise<{ sessions: string; stderr(): string }> {
  const sessions = tempDir('dsh-worker-sessions-')
  const child = spawn(process.execPath, [dshBin, 'worker', '--model', `scripted:${script}`, '--session-dir', sessions, '--config', config], {
    cwd: repoRoot,
    env: { ...process.env, DSH_HOME: tempDir('dsh-home-'), DSH_REDIS_URL: server.url },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let stderr = ''
  child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk))
  child.stdout!.resume()
  const exited = new Promise<void>((resolve) => child.on('close', () => resolve()))
  cleanups.push(async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL')
    await exited
  })
  await until(
    () => /dsh worker \S+: taking jobs/.test(stderr),
    () => (child.exitCode !== null ? `dsh worker exited ${child.exitCode}: ${stderr}` : undefined),
  )
  return { sessions, stderr: () => stderr }
}

function file(dir: string, name: string, lines: string[]): string {
  const path = join(dir, name)
  writeFileSync(path, lines.join('\n'))
  return path
}

/** The permission recorded with each bash call of the sessions in `dir`. */
function permissions(dir: string): Array<Record<string, unknown>> {
  const found: Array<Record<string, unknown>> = []
  for (const name of readdirSync(dir, { recursive: true, encoding: 'utf8' }).filter((entry) => entry.endsWith('.jsonl'))) {
    for (const line of readFileSync(join(dir, name), 'utf8').trim().split('\n')) {
      const event = JSON.parse(line) as { type?: string; permission?: Record<string, unknown> }
      if (event.type === 'tool/result' && event.permission) found.push(event.permission)
    }
  }
  return found
}

describe('dsh worker under the default of the root that delegated', () => {
  it("a worker whose config default allows runs nothing under a root that rejects what no rule decides, and says on its log what to change; under a root that allows, the command runs", async () => {
    const server = await startRedis()
    cleanups.push(() => server.stop())
    const dir = tempDir()
    const script = file(dir, 'child.yml', ['refused', 'allowed'].flatMap((marker) => [
      `- when: { prompt: "^touch ${marker}$" }`,
      '  reply:',
      `    - call: { tool: bash, args: { command: "touch ${dir}/${marker}" } }`,
      '    - text: "child: {{last_tool_result}}"',
    ]))
    const worker = await startWorker(server, script, file(dir, 'worker.yml', ['- id: approvals', '  name: "@dsh/approvals"', '  config: { default: allow }']))
    const config = file(dir, 'root.yml', ['- id: subagent-queue', '  name: "@dsh/subagent-queue"', '- id: tool-subagent-queue', '  name: "@dsh/tool-subagent"', '  config: { provider: queue, toolName: subagent_queue }'])
    const root = (marker: string, permission: 'allow' | 'reject') => {
      const parent = file(dir, `root-${marker}.yml`, ['- when: { depth: 0 }', '  reply:', `    - call: { tool: subagent_queue, args: { description: "queue child", prompt: "touch ${marker}" } }`, '    - text: "root: {{last_tool_result}}"'])
      return runDsh(['run', '--config', config, '--permission', permission, '--model', `scripted:${parent}`, '--session-dir', tempDir(), 'go'], { env: { DSH_REDIS_URL: server.url }, timeoutMs: 60_000 })
    }

    const refused = await root('refused', 'reject')
    expect(refused.code, refused.stderr).toBe(0)
    expect(existsSync(join(dir, 'refused'))).toBe(false)
    expect(refused.stdout).toMatch(/root: child: .*approvals default its lineage carried is reject/)
    expect(permissions(worker.sessions)).toEqual([expect.objectContaining({ decision: 'reject', source: 'default', by: "the delegation tree's root (its lineage)" })])
    expect(worker.stderr()).toMatch(/job \S+ of queue dsh: its root rejects what no approval rule decides .* start the root with --permission allow, or allow them by rules in the root's config/)

    const allowed = await root('allowed', 'allow')
    expect(allowed.code, allowed.stderr).toBe(0)
    expect(existsSync(join(dir, 'allowed'))).toBe(true)
  })

  it("a job whose lineage does not say what its root allows (a parent of an older dsh) runs only what its rules allow, and the worker says what to change", async () => {
    const server = await startRedis()
    cleanups.push(() => server.stop())
    const dir = tempDir()
    const script = file(dir, 'child.yml', ['touch ruled', 'touch unruled'].flatMap((prompt) => [
      `- when: { prompt: "^${prompt}$" }`,
      '  reply:',
      `    - call: { tool: bash, args: { command: "touch ${dir}/${prompt.split(' ')[1]}" } }`,
      '    - text: "child: {{last_tool_result}}"',
    ]))
    const worker = await startWorker(server, script, file(dir, 'worker.yml', ['- id: approvals', '  name: "@dsh/approvals"', '  config: { default: allow }']))
    // The job an older parent writes: its lineage carries its rules, and no approvalDefault.
    const queue = new Queue('dsh', { connection: { path: server.socket } })
    cleanups.push(() => queue.close())
    const older = { parentSession: 'an-older-parent', delegationDepth: 1, provider: 'queue', permissions: [{ from: 'config', allow: [`bash(touch ${dir}/ruled)`] }] }
    for (const prompt of ['touch ruled', 'touch unruled']) {
      const job = await queue.add(JOB_NAME, jobPayload(prompt, older))
      while ((await job.getState()) !== 'completed') await new Promise((resolve) => setTimeout(resolve, 100))
    }
    expect(existsSync(join(dir, 'ruled'))).toBe(true)
    expect(existsSync(join(dir, 'unruled'))).toBe(false)
    expect(permissions(worker.sessions)).toContainEqual(expect.objectContaining({ decision: 'reject', source: 'default', reason: expect.stringMatching(/lineage does not say what its root allows .*update the parent's dsh/) }))
    expect(worker.stderr()).toMatch(/job \S+ of queue dsh: its lineage does not say what its root allows with nobody to ask .*update the parent's dsh, or allow the commands by rules in the root's config/)
  })
})
