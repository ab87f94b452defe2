import { spawn, type ChildProcess } from 'node:child_process'
import { mkdirSync, readdirSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { startRedis, type RedisServer } from '@dsh/testkit/redis'
import { dshBin, runDsh, tempDir } from './cli.js'
import { until } from './processes.js'

/**
 * The same workflow with its reviewer helper on spawn and on the queue provider, across two
 * `dsh worker` processes on a real Redis: the printed result is the same, and the workers
 * between them ran every call.
 */
const workers: Array<{ child: ChildProcess; exited: Promise<unknown> }> = []
let server: RedisServer | undefined
let project: string
afterEach(async () => {
  for (const worker of workers.splice(0)) {
    if (worker.child.exitCode === null && worker.child.signalCode === null) worker.child.kill('SIGTERM')
    await worker.exited
  }
  await server?.stop()
  server = undefined
  rmSync(project, { recursive: true, force: true })
})

function write(file: string, text: string): void {
  const path = join(project, file)
  mkdirSync(join(path, '..'), { recursive: true })
  writeFileSync(path, text)
}

const SCRIPT = '- when: { prompt: "^Review" }\n  reply:\n    - delay_ms: 50\n      text: "looks fine"\n- reply:\n    - text: "unused"\n'

async function startWorker(redisUrl: string, sessions: string): Promise<void> {
  const child = spawn(process.execPath, [dshBin, 'worker', '--model', 'scripted:model.yml', '--session-dir', sessions, '--concurrency', '2'], {
    cwd: project,
    env: { ...process.env, DSH_HOME: tempDir('dsh-home-'), DSH_REDIS_URL: redisUrl },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let stderr = ''
  child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk))
  child.stdout!.resume()
  const exited = new Promise((resolve) => child.on('close', resolve))
  workers.push({ child, exited })
  await until(
    () => /taking jobs/.test(stderr),
    () => (child.exitCode !== null ? `dsh worker exited ${child.exitCode}: ${stderr}` : undefined),
  )
}

const reviewer = (provider: string) => `---\nname: reviewer\ndescription: Reviews one file.\nprovider: ${provider}\n---\nYou review one file.\n`

describe('a workflow whose reviewer runs on the queue', () => {
  it('gives the same result as on spawn, its calls run by two dsh worker processes', async () => {
    project = tempDir('dsh-workflow-queue-')
    write('model.yml', SCRIPT)
    write('review.mjs', `const files = ['f1', 'f2', 'f3', 'f4', 'f5', 'f6', 'f7', 'f8']
export default async ({ agent, parallel }) => {
  const reviews = await parallel(files, (file) => agent('reviewer', 'Review files/' + file, { label: file }), { concurrency: 4 })
  return files.map((file, index) => file + ': ' + reviews[index].text).join('\\n')
}
`)
    write('.dsh/agents/reviewer.md', reviewer('spawn'))
    const onSpawn = await runDsh(['workflow', 'run', 'review.mjs', '--model', 'scripted:model.yml', '--session-dir', tempDir()], { cwd: project, timeoutMs: 60_000 })
    expect(onSpawn.code).toBe(0)
    expect(onSpawn.stdout).toContain('f8: looks fine')

    server = await startRedis()
    const workerSessions = [tempDir('dsh-worker-a-'), tempDir('dsh-worker-b-')]
    for (const sessions of workerSessions) await startWorker(server.url, sessions)
    write('.dsh/agents/reviewer.md', reviewer('queue'))
    write('queue.yml', '- id: subagent-queue\n  name: "@dsh/subagent-queue"\n')
    const onQueue = await runDsh(['workflow', 'run', 'review.mjs', '--config', 'queue.yml', '--model', 'scripted:model.yml', '--session-dir', tempDir()], { cwd: project, env: { DSH_REDIS_URL: server.url }, timeoutMs: 60_000 })
    expect(onQueue.stderr).toMatch(/\[subagent\] start queue queue:\S+ "f1" \[helper reviewer\]/)
    expect(onQueue.stderr.match(/\[subagent\] end queue queue:\S+ completed/g)).toHaveLength(8)
    expect(onQueue.code).toBe(0)
    expect(onQueue.stdout).toBe(onSpawn.stdout)
    // Every call was a job a worker ran; with two jobs each at once, both workers took some.
    const ran = workerSessions.map((dir) => readdirSync(dir).filter((name) => name.endsWith('.jsonl')).length)
    expect(ran[0]! + ran[1]!).toBe(8)
    expect(ran.every((count) => count > 0)).toBe(true)
  })
})
