import { spawn, type ChildProcess } from 'node:child_process'
import { readdirSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { Queue } from 'bullmq'
import { startRedis, type RedisServer } from '@dsh/testkit/redis'
import { dshBin, repoRoot, runDsh, tempDir } from './cli.js'
import { until } from './processes.js'

interface Worker {
  child: ChildProcess
  sessions: string
  stderr(): string
  exited: Promise<number | null>
}

const workers: Worker[] = []
const servers: RedisServer[] = []
afterEach(async () => {
  for (const worker of workers.splice(0)) {
    if (worker.child.exitCode === null && worker.child.signalCode === null) worker.child.kill('SIGKILL')
    await worker.exited
  }
  for (const server of servers.splice(0)) await server.stop()
})

async function redis(): Promise<RedisServer> {
  const server = await startRedis()
  servers.push(server)
  return server
}

/** The worker's scripted model: a quick answer, and a slow one for prompts that ask for it. */
function workerScript(dir: string): string {
  const path = join(dir, 'worker.yml')
  writeFileSync(path, '- when: { prompt: "slowly" }\n  reply:\n    - delay_ms: 4000\n      text: "a slow answer"\n- reply:\n    - text: "Paris is the capital of France."\n')
  return path
}

/** `dsh worker` as a real process; resolves once it says it takes jobs. */
async function startWorker(server: RedisServer, script: string, extra: string[] = []): Promise<Worker> {
  const sessions = tempDir('dsh-worker-sessions-')
  const child = spawn(process.execPath, [dshBin, 'worker', '--model', `scripted:${script}`, '--session-dir', sessions, '--lock-ms', '1000', ...extra], {
    cwd: repoRoot,
    env: { ...process.env, DSH_HOME: tempDir('dsh-home-'), DSH_REDIS_URL: server.url },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let stdout = ''
  let stderr = ''
  child.stdout!.on('data', (chunk: Buffer) => (stdout += chunk))
  child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk))
  const exited = new Promise<number | null>((resolve) => child.on('close', (code) => resolve(code)))
  const worker: Worker = { child, sessions, stderr: () => stderr, exited }
  workers.push(worker)
  await until(
    () => stdout.includes('taking jobs'),
    () => (child.exitCode !== null ? `dsh worker exited ${child.exitCode}: ${stderr}` : undefined),
  )
  return worker
}

/** A parent whose scripted model delegates `prompt` through the queue provider and repeats the answer. */
function parentSetup(prompt: string, providerConfig = ''): { config: string; script: string } {
  const dir = tempDir()
  const config = join(dir, 'queue.yml')
  writeFileSync(config, `- id: subagent-queue\n  name: "@dsh/subagent-queue"\n  config:\n    queue: dsh${providerConfig}\n- id: tool-subagent-queue\n  name: "@dsh/tool-subagent"\n  config:\n    provider: queue\n    toolName: subagent_queue\n`)
  const script = join(dir, 'parent.yml')
  writeFileSync(script, `- when: { depth: 0 }\n  reply:\n    - call: { tool: subagent_queue, args: { description: "ask a worker", prompt: ${JSON.stringify(prompt)} } }\n    - text: "The worker answered: {{last_tool_result}}"\n`)
  return { config, script }
}

/** Polls `check` until it holds (the test's own timeout bounds it). */
async function eventually(check: () => Promise<boolean>): Promise<void> {
  while (!(await check())) await new Promise((resolve) => setTimeout(resolve, 100))
}

function sessionFiles(dir: string): string[] {
  return readdirSync(dir, { recursive: true, encoding: 'utf8' }).filter((name) => name.endsWith('.jsonl'))
}

describe('dsh worker and the queue provider, on a real Redis', () => {
  it('a parent delegating through the queue reaches a worker, gets its answer, and the worker stores the child under the parent', async () => {
    const server = await redis()
    const worker = await startWorker(server, workerScript(tempDir()))
    const { config, script } = parentSetup('What is the capital of France?')
    const sessions = tempDir()
    const result = await runDsh(['run', '--config', config, '--model', `scripted:${script}`, '--session-dir', sessions, 'ask a worker'], { env: { DSH_REDIS_URL: server.url } })
    expect(result.stderr).toMatch(/\[subagent\] end queue queue:\S+ completed/)
    expect(result.stdout).toContain('The worker answered: Paris is the capital of France.')
    expect(result.code).toBe(0)
    const parentTree = await runDsh(['sessions', 'tree', '--session-dir', sessions])
    expect(parentTree.stdout).toMatch(/queue "ask a worker" +stored elsewhere: a dsh worker of queue "dsh"/)
    const parentId = parentTree.stdout.split(/\s/)[0]
    const workerTree = await runDsh(['sessions', 'tree', '--session-dir', worker.sessions])
    expect(workerTree.stdout).toContain(parentId)
    expect(workerTree.stdout).toMatch(/queue "ask a worker" +completed +\(depth 1\)/)
    worker.child.kill('SIGTERM')
    expect(await worker.exited).toBe(0)
  })

  it('a worker killed with SIGKILL mid-job: another worker takes the job over and the parent gets its answer', async () => {
    const server = await redis()
    const script = workerScript(tempDir())
    const first = await startWorker(server, script)
    const { config, script: parentScript } = parentSetup('answer slowly')
    const parent = runDsh(['run', '--config', config, '--model', `scripted:${parentScript}`, '--session-dir', tempDir(), 'ask a worker'], { env: { DSH_REDIS_URL: server.url } })
    // The first worker has the job once its child session exists.
    await until(() => sessionFiles(first.sessions).length > 0)
    first.child.kill('SIGKILL')
    await first.exited
    const second = await startWorker(server, script)
    const result = await parent
    expect(result.stdout).toContain('The worker answered: a slow answer')
    expect(result.code).toBe(0)
    expect(sessionFiles(second.sessions)).toHaveLength(1)
    // Each session says which try of the job it was: the first worker's the first, the second's the next.
    const attemptOf = (dir: string) => (JSON.parse(readFileSync(join(dir, sessionFiles(dir)[0]!), 'utf8').split('\n')[0]!) as { header?: { attempt?: number } }).header?.attempt
    expect(attemptOf(first.sessions)).toBe(1)
    expect(attemptOf(second.sessions)).toBe(2)
  })

  it('a fan-out of 30 spreads over three workers; one SIGKILLed mid-job, all 30 still complete, the survivors running the parts it left unfinished', async () => {
    const server = await redis()
    const dir = tempDir()
    const script = join(dir, 'worker.yml')
    writeFileSync(script, '- reply:\n    - delay_ms: 600\n      text: "done"\n')
    const pool = await Promise.all([0, 1, 2].map(() => startWorker(server, script, ['--concurrency', '4'])))
    const config = join(dir, 'queue.yml')
    writeFileSync(config, '- id: subagent-queue\n  name: "@dsh/subagent-queue"\n- id: tool-subagent-queue\n  name: "@dsh/tool-subagent"\n  config:\n    provider: queue\n    toolName: subagent_queue\n')
    const calls = Array.from({ length: 30 }, (_, i) => `        - { tool: subagent_queue, args: { description: "part ${i}", prompt: "do part ${i}" } }`).join('\n')
    const parentScript = join(dir, 'parent.yml')
    writeFileSync(parentScript, `- when: { depth: 0 }\n  reply:\n    - calls:\n${calls}\n    - text: "all parts collected"\n`)
    const sessions = tempDir()
    const parent = runDsh(['run', '--config', config, '--model', `scripted:${parentScript}`, '--session-dir', sessions, 'fan out'], { env: { DSH_REDIS_URL: server.url }, timeoutMs: 60_000 })
    await until(() => sessionFiles(pool[0].sessions).length > 0)
    pool[0].child.kill('SIGKILL')
    const result = await parent
    expect(result.stdout).toContain('all parts collected')
    expect(result.code).toBe(0)
    const parentLog = readFileSync(join(sessions, sessionFiles(sessions)[0]), 'utf8')
    const results = parentLog.split('\n').filter((line) => line.includes('"type":"tool/result"'))
    expect(results).toHaveLength(30)
    for (const line of results) expect(line).toContain('done')
    // The survivors finished every part; the killed worker's unfinished parts were run again there.
    const finished = (dirOf: string) => sessionFiles(dirOf).filter((file) => readFileSync(join(dirOf, file), 'utf8').includes('"type":"assistant/message"')).length
    expect(finished(pool[1].sessions) + finished(pool[2].sessions)).toBeGreaterThanOrEqual(30 - finished(pool[0].sessions))
    expect(finished(pool[1].sessions)).toBeGreaterThan(0)
    expect(finished(pool[2].sessions)).toBeGreaterThan(0)
  }, 90_000)

  it("a parent killed mid fan-out and resumed takes up each interrupted delegation: none is enqueued twice, and the parent's model sees every result", async () => {
    const server = await redis()
    const worker = await startWorker(server, workerScript(tempDir()))
    const { config } = parentSetup('unused')
    const dir = tempDir()
    const script = join(dir, 'parent.yml')
    const calls = [0, 1, 2].map((i) => `        - { tool: subagent_queue, args: { description: "part ${i}", prompt: "answer slowly ${i}" } }`).join('\n')
    // Resumed, the model collects the three taken-up calls (background tasks subagent-1..3) with task_output.
    const collect = [1, 2, 3].map((n) => `    - call: { tool: task_output, args: { task_id: subagent-${n}, wait: true, timeout_ms: 30000 } }\n`).join('')
    writeFileSync(script, `- when: { depth: 0 }\n  reply:\n    - calls:\n${calls}\n${collect}    - text: "collected"\n${'    - text: "noted"\n'.repeat(6)}`)
    const sessions = tempDir()
    const env = { ...process.env, DSH_HOME: tempDir('dsh-home-'), DSH_REDIS_URL: server.url }
    const first = spawn(process.execPath, [dshBin, 'run', '--config', config, '--model', `scripted:${script}`, '--session-dir', sessions, 'fan out'], { cwd: repoRoot, env, stdio: 'ignore' })
    const firstExited = new Promise((resolve) => first.on('close', resolve))
    // All three jobs are taken by the worker; then the parent dies without a word.
    await until(() => sessionFiles(worker.sessions).length === 3)
    first.kill('SIGKILL')
    await firstExited
    const parentId = sessionFiles(sessions)[0]!.replace(/\.jsonl$/, '')
    const resumed = await runDsh(['run', '--config', config, '--model', `scripted:${script}`, '--session-dir', sessions, '--resume', parentId, 'continue'], { env: { DSH_REDIS_URL: server.url }, timeoutMs: 60_000 })
    expect(resumed.code, resumed.stderr).toBe(0)
    const log = readFileSync(join(sessions, `${parentId}.jsonl`), 'utf8')
    // Each interrupted call's answer reached the parent's model after the resume, through task_output.
    expect(resumed.stdout).toContain('collected')
    const outputs = log.split('\n').filter((line) => line.includes('"type":"tool/result"') && line.includes('"name":"task_output"'))
    expect(outputs).toHaveLength(3)
    for (const line of outputs) expect(line).toContain('a slow answer')
    // The worker ran each job once: taking the calls up again found the jobs, it did not add new ones.
    expect(sessionFiles(worker.sessions)).toHaveLength(3)
  }, 90_000)

  it('Redis restarted mid-job (with its append-only file): no job is lost and the parent gets its answer', async () => {
    const server = await startRedis({ appendOnly: true })
    servers.push(server)
    await startWorker(server, workerScript(tempDir()))
    const { config, script } = parentSetup('answer slowly')
    const parent = runDsh(['run', '--config', config, '--model', `scripted:${script}`, '--session-dir', tempDir(), 'ask a worker'], { env: { DSH_REDIS_URL: server.url }, timeoutMs: 60_000 })
    await new Promise((resolve) => setTimeout(resolve, 1500))
    await server.restart()
    const result = await parent
    expect(result.stdout).toContain('The worker answered: a slow answer')
    expect(result.code).toBe(0)
  }, 60_000)

  it('a delegation that times out is cancelled on the worker holding it: the worker\'s child ends aborted', async () => {
    const server = await redis()
    const worker = await startWorker(server, workerScript(tempDir()))
    const { config, script } = parentSetup('answer slowly', '\n    timeoutMs: 1000')
    const result = await runDsh(['run', '--config', config, '--model', `scripted:${script}`, '--session-dir', tempDir(), 'ask a worker'], { env: { DSH_REDIS_URL: server.url } })
    expect(result.stdout).toMatch(/The worker answered: .*(timed out|timeout)/i)
    await eventually(async () => (await runDsh(['sessions', 'tree', '--session-dir', worker.sessions])).stdout.includes('aborted'))
  })

  it('a job that is not ours fails at once with the reason, and the worker goes on serving', async () => {
    const server = await redis()
    await startWorker(server, workerScript(tempDir()))
    const queue = new Queue('dsh', { connection: { path: server.socket } })
    try {
      const job = await queue.add('delegation', { v: 99, prompt: 'hi' }, { attempts: 3 })
      await eventually(async () => (await job.getState()) === 'failed')
      const failed = (await queue.getJob(job.id!))?.failedReason
      expect(failed).toMatch(/wire version 99, this worker reads version 1/)
      expect((await queue.getJob(job.id!))?.attemptsMade).toBe(1)
    } finally {
      await queue.close()
    }
    const { config, script } = parentSetup('What is the capital of France?')
    const result = await runDsh(['run', '--config', config, '--model', `scripted:${script}`, '--session-dir', tempDir(), 'ask a worker'], { env: { DSH_REDIS_URL: server.url } })
    expect(result.stdout).toContain('The worker answered: Paris is the capital of France.')
  })

  it('with Redis unreachable, a delegation fails with one line naming it and the run still ends', async () => {
    const { config, script } = parentSetup('What is the capital of France?')
    const result = await runDsh(['run', '--config', config, '--model', `scripted:${script}`, '--session-dir', tempDir(), 'ask a worker'], { env: { DSH_REDIS_URL: `unix://${join(tempDir(), 'nothing.sock')}` } })
    expect(result.stdout).toMatch(/The worker answered: .*Redis at unix:\/\/\S+nothing\.sock \(queue "dsh"\) cannot be reached/)
    expect(result.code).toBe(0)
  })

  it('an unset or malformed Redis URL variable is a one-line error naming the variable, for the provider and for dsh worker', async () => {
    const { config } = parentSetup('x')
    const check = await runDsh(['config', 'check', '--config', config], { env: { DSH_REDIS_URL: '' } })
    expect(check.code).toBe(2)
    expect(check.stderr).toMatch(/DSH_REDIS_URL is not set \(or empty\)/)
    const worker = await runDsh(['worker', '--model', 'scripted:examples/acp-child.yml'], { env: { DSH_REDIS_URL: 'http://example.invalid' } })
    expect(worker.code).toBe(2)
    expect(worker.stderr.trim().split('\n')).toHaveLength(1)
    expect(worker.stderr).toMatch(/DSH_REDIS_URL holds a http: URL/)
  })
})
