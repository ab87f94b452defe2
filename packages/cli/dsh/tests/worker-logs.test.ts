/**
 * What a long-lived worker tells its operator, through the built CLI: with Redis down, the
 * queue provider and `dsh worker` say in one line which Redis (without its password) and
 * why, and stop trying; a running `dsh worker` and `dsh a2a serve` write one line on
 * stderr as each job or task starts and one as it ends (its id, helper and label, outcome,
 * duration, usage). On a real redis-server (testkit) and real loopback sockets.
 */
import { spawn, type ChildProcess } from 'node:child_process'
import { randomUUID } from 'node:crypto'
import { createServer } from 'node:net'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { Role, type StreamResponse } from '@a2a-js/sdk'
import { ClientFactory, DefaultAgentCardResolver, JsonRpcTransportFactory } from '@a2a-js/sdk/client'
import { startRedis, type RedisServer } from '@dsh/testkit/redis'
import { dshBin, repoRoot, runDsh, tempDir } from './cli.js'
import { serve } from './a2a-serve-process.js'
import { until } from './processes.js'

const servers: RedisServer[] = []
const children: ChildProcess[] = []
afterEach(async () => {
  for (const child of children.splice(0)) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL')
  for (const server of servers.splice(0)) await server.stop()
})

/** A loopback port nothing listens on: one the OS handed out, closed again. */
async function closedPort(): Promise<number> {
  const server = createServer()
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as { port: number }
  await new Promise<void>((resolve) => server.close(() => resolve()))
  return port
}

/** A parent that delegates through the queue provider, labelled "ask a worker". */
function queueParent(): { config: string; script: string } {
  const dir = tempDir()
  const config = join(dir, 'queue.yml')
  writeFileSync(config, '- id: subagent-queue\n  name: "@dsh/subagent-queue"\n- id: tool-subagent-queue\n  name: "@dsh/tool-subagent"\n  config: { provider: queue, toolName: subagent_queue }\n')
  const script = join(dir, 'parent.yml')
  writeFileSync(script, '- when: { depth: 0 }\n  reply:\n    - call: { tool: subagent_queue, args: { description: "ask a worker", prompt: "capital of France?" } }\n    - text: "The worker answered: {{last_tool_result}}"\n')
  return { config, script }
}

describe('with Redis down', () => {
  it('a redis-server that was killed: the delegation and dsh worker each say in one line which Redis and why, and stop', async () => {
    // Killed, it leaves its socket behind: what a crashed Redis looks like to a client.
    const server = await startRedis()
    await server.stop({ keepData: true })
    const { config, script } = queueParent()
    const run = await runDsh(['run', '--config', config, '--model', `scripted:${script}`, '--session-dir', tempDir(), 'go'], { env: { DSH_REDIS_URL: server.url } })
    expect(run.code, run.stderr).toBe(0)
    const said = run.stdout.split('\n').find((line) => line.startsWith('The worker answered:'))!
    expect(said).toContain(`Redis at ${server.url} (queue "dsh") cannot be reached: connection refused (connect ECONNREFUSED ${server.socket})`)
    expect(said).not.toContain('maxRetriesPerRequest')
    const worker = await runDsh(['worker', '--model', 'scripted:examples/acp-child.yml', '--session-dir', tempDir()], { env: { DSH_REDIS_URL: server.url } })
    expect(worker.code).toBe(2)
    expect(worker.stderr).toBe(`dsh worker: Redis at ${server.url} cannot be reached: connection refused (connect ECONNREFUSED ${server.socket})\n`)
  })

  it('a refused TCP address: "connection refused" and the URL without its user or password, in one line, from the provider and from dsh worker', async () => {
    const port = await closedPort()
    const url = `redis://operator:hunter2-secret@127.0.0.1:${port}/0`
    const { config, script } = queueParent()
    const run = await runDsh(['run', '--config', config, '--model', `scripted:${script}`, '--session-dir', tempDir(), 'go'], { env: { DSH_REDIS_URL: url } })
    expect(run.code, run.stderr).toBe(0)
    expect(run.stdout).toContain(`Redis at redis://127.0.0.1:${port}/0 (queue "dsh") cannot be reached: connection refused (connect ECONNREFUSED 127.0.0.1:${port})`)
    const worker = await runDsh(['worker', '--model', 'scripted:examples/acp-child.yml', '--session-dir', tempDir()], { env: { DSH_REDIS_URL: url } })
    expect(worker.code).toBe(2)
    expect(worker.stderr).toBe(`dsh worker: Redis at redis://127.0.0.1:${port}/0 cannot be reached: connection refused (connect ECONNREFUSED 127.0.0.1:${port})\n`)
    for (const output of [run.stdout, run.stderr, worker.stdout, worker.stderr]) {
      expect(output).not.toContain('hunter2-secret')
      expect(output).not.toContain('operator')
      expect(output).not.toContain('maxRetriesPerRequest')
    }
  })
})

describe('a line per job or task', () => {
  it('dsh worker writes one line as a job starts and one as it ends: its id, queue, label, outcome, duration and usage', async () => {
    const server = await startRedis()
    servers.push(server)
    const worker = spawn(process.execPath, [dshBin, 'worker', '--model', 'scripted:examples/acp-child.yml', '--session-dir', tempDir()], { cwd: repoRoot, env: { ...process.env, DSH_HOME: tempDir('dsh-home-'), DSH_REDIS_URL: server.url }, stdio: ['ignore', 'pipe', 'pipe'] })
    children.push(worker)
    let stderr = ''
    worker.stderr!.on('data', (chunk: Buffer) => (stderr += chunk))
    await until(
      () => /dsh worker \S+: taking jobs/.test(stderr),
      () => (worker.exitCode !== null ? `dsh worker exited ${worker.exitCode}: ${stderr}` : undefined),
    )
    const { config, script } = queueParent()
    const run = await runDsh(['run', '--config', config, '--model', `scripted:${script}`, '--session-dir', tempDir(), 'go'], { env: { DSH_REDIS_URL: server.url } })
    expect(run.stdout).toContain('The worker answered: Paris is the capital of France.')
    // Stopped, it has written all it will: what it said of the job is read whole.
    const exited = new Promise((resolve) => worker.on('close', resolve))
    worker.kill('SIGTERM')
    await exited
    const lines = stderr.split('\n').filter((line) => line.startsWith('dsh worker: job '))
    expect(lines, stderr).toHaveLength(2)
    const [start, end] = lines
    const id = /^dsh worker: job (\S+) started/.exec(start!)![1]!
    expect(start).toBe(`dsh worker: job ${id} started (queue dsh, attempt 1; "ask a worker")`)
    expect(end).toMatch(new RegExp(`^dsh worker: job ${id.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')} completed after \\d+(\\.\\d)? m?s \\(queue dsh, attempt 1; "ask a worker"; \\d+ tokens in, \\d+ out\\)$`))
  })

  it('dsh a2a serve writes one line as a task starts and one as it ends: its id, context, label, state, duration and usage', async () => {
    const served = await serve(['--model', 'scripted:examples/acp-child.yml', '--session-dir', tempDir()])
    const client = await new ClientFactory({ transports: [new JsonRpcTransportFactory({ fetchImpl: fetch })], cardResolver: new DefaultAgentCardResolver({ fetchImpl: fetch }) }).createFromUrl(served.url)
    const events: StreamResponse[] = []
    const request = {
      tenant: '',
      message: { messageId: randomUUID(), contextId: '', taskId: '', role: Role.ROLE_USER, parts: [{ content: { $case: 'text' as const, value: 'capital of France?' }, metadata: undefined, filename: '', mediaType: 'text/plain' }], metadata: { dsh: { parentSession: 'remote-parent', delegationDepth: 1, provider: 'a2a', label: 'geo' } }, extensions: [], referenceTaskIds: [] },
      configuration: undefined,
      metadata: undefined,
    }
    for await (const event of client.sendMessageStream(request)) events.push(event)
    served.child.kill('SIGTERM')
    expect(await served.exited).toBe(0)
    const lines = served.stderr().split('\n').filter((line) => line.startsWith('dsh a2a: task '))
    expect(lines, served.stderr()).toHaveLength(2)
    const [start, end] = lines
    const [, id, context] = /^dsh a2a: task (\S+) started \(context (\S+); "geo"\)$/.exec(start!) ?? []
    expect(id, start).toBeDefined()
    expect(end).toMatch(new RegExp(`^dsh a2a: task ${id} completed after \\d+(\\.\\d)? m?s \\(context ${context}; "geo"; \\d+ tokens in, \\d+ out\\)$`))
  })
})
