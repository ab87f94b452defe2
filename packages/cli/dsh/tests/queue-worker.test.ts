import { spawn, type ChildProcess } from 'node:child_process'
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { Queue } from 'bullmq'
import { startRedis, type RedisServer } from '@dsh/testkit/redis'
import { dshBin, repoRoot, runDsh, tempDir } from './cli.js'
import { until } from './processes.js'

interface Worker {
  child: ChildProcess
  sessions: string
  /** The name it gives itself in job logs and failures (`host:pid`). */
  name: string
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
async function startWorker(server: RedisServer, script: string, extra: string[] = [], env: Record<string, string> = {}): Promise<Worker> {
  const sessions = tempDir('dsh-worker-sessions-')
  const child = spawn(process.execPath, [dshBin, 'worker', '--model', `scripted:${script}`, '--session-dir', sessions, '--lock-ms', '1000', ...extra], {
    cwd: repoRoot,
    env: { ...process.env, DSH_HOME: tempDir('dsh-home-'), DSH_REDIS_URL: server.url, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let stdout = ''
  let stderr = ''
  child.stdout!.on('data', (chunk: Buffer) => (stdout += chunk))
  child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk))
  const exited = new Promise<number | null>((resolve) => child.on('close', (code) => resolve(code)))
  const worker: Worker = { child, sessions, name: '', stderr: () => stderr, exited }
  workers.push(worker)
  await until(
    () => stdout.includes('taking jobs'),
    () => (child.exitCode !== null ? `dsh worker exited ${child.exitCode}: ${stderr}` : undefined),
  )
  await until(() => /dsh worker \S+: taking jobs/.test(stderr))
  worker.name = /dsh worker (\S+): taking jobs/.exec(stderr)![1]!
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

/**
 * Whether a session file of `dir` has its whole header line: a worker holds its job from
 * then on. A kill between a file's creation and its first write (appends go out at the end
 * of the event-loop turn) would leave it empty, and the try unrecorded.
 */
function headerWritten(dir: string): boolean {
  return sessionFiles(dir).some((name) => readFileSync(join(dir, name), 'utf8').includes('\n'))
}

type Line = { header?: Record<string, unknown> & { id: string; delegationDepth?: number }; type?: string; reason?: string; error?: string; usage?: { outputTokens: number }; message?: { content: Array<{ text?: string }> }; call?: { id: string; name: string; args?: { command?: string } }; result?: { callId: string; isError?: boolean; content: Array<{ text?: string }> }; permission?: Record<string, unknown> }

/** Every session file of `dir`, as its lines. */
function sessionsIn(dir: string): Line[][] {
  return sessionFiles(dir).map((name) => readFileSync(join(dir, name), 'utf8').trim().split('\n').map((line) => JSON.parse(line) as Line))
}

/** A config file of `lines` in a new directory. */
function configFile(lines: string[]): string {
  const file = join(tempDir(), 'dsh.yml')
  writeFileSync(file, lines.join('\n'))
  return file
}

const QUEUE_ENTRIES = ['- id: subagent-queue', '  name: "@dsh/subagent-queue"', '- id: tool-subagent-queue', '  name: "@dsh/tool-subagent"', '  config: { provider: queue, toolName: subagent_queue }']

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
    // The first worker has the job once its child session has its header.
    await until(() => headerWritten(first.sessions))
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

  it("a helper defined for the queue runs on the worker with its persona, tool list and model; one whose model the worker cannot resolve ends error saying so, nothing run", async () => {
    const server = await redis()
    const worker = await startWorker(server, workerScript(tempDir()))
    const project = tempDir('dsh-queue-helpers-')
    mkdirSync(join(project, '.dsh', 'agents'), { recursive: true })
    const helperModel = join(project, 'helper.yml')
    writeFileSync(helperModel, `- reply:\n    - call: { tool: bash, args: { command: "touch ${join(project, 'bash-ran')}" } }\n    - text: "the helper's model answered after: {{last_tool_result}}"\n`)
    writeFileSync(join(project, '.dsh/agents/queued.md'), ['---', 'name: queued', 'description: Answers from a queue worker.', 'provider: queue', 'tools: [task_list]', `model: scripted:${helperModel}`, '---', 'You are the queued helper persona.', ''].join('\n'))
    // A model spec relative to the parent's directory: the worker runs elsewhere and has no such file.
    writeFileSync(join(project, 'far.yml'), '- reply: [{ text: "never" }]\n')
    writeFileSync(join(project, '.dsh/agents/far.md'), ['---', 'name: far', 'description: Runs on a model only the parent has.', 'provider: queue', 'model: scripted:far.yml', '---', 'You are far.', ''].join('\n'))
    writeFileSync(join(project, 'parent.yml'), [
      '- when: { depth: 0 }',
      '  reply:',
      '    - calls:',
      '        - { tool: subagent, args: { agent: queued, description: "ask the queue", prompt: "what do the notes say" } }',
      '        - { tool: subagent, args: { agent: far, description: "ask far", prompt: "anything at all" } }',
      '    - text: "results: {{tool_results}}"',
    ].join('\n'))
    // The user's own config lets the project's definitions name scripted models (the test's stand-in for a real one).
    const config = configFile(['- id: subagent-queue', '  name: "@dsh/subagent-queue"', '- id: agent-definitions', '  name: "@dsh/agent-definitions"', '  config: { projectScriptedModels: true }'])
    const sessions = tempDir()
    const result = await runDsh(['run', '--config', config, '--model', 'scripted:parent.yml', '--session-dir', sessions, '--permission', 'allow', 'go'], { cwd: project, env: { DSH_REDIS_URL: server.url } })
    expect(result.code, result.stderr).toBe(0)
    // The helper's own model answered, and bash, outside its tool list, was not there to run.
    expect(result.stdout).toMatch(/results: the helper's model answered after: .*bash/)
    expect(existsSync(join(project, 'bash-ran'))).toBe(false)
    const [queued, ...others] = sessionsIn(worker.sessions)
    expect(others).toEqual([])
    expect(queued![0]!.header).toMatchObject({ origin: 'queue', helper: { name: 'queued' }, label: 'ask the queue' })
    // The instructions went as the child's persona, not at the head of its task.
    const firstMessage = queued!.find((line) => line.type === 'user/message')!
    expect(firstMessage.message!.content.map((block) => block.text).join('')).toBe('what do the notes say')
    const bash = queued!.find((line) => line.type === 'tool/result')!
    expect(bash.result!.isError).toBe(true)
    // The worker refused the other at once, naming itself and the model; the parent's model read why.
    expect(result.stdout).toContain(`the subagent ended error: the queue job`)
    expect(result.stdout).toMatch(new RegExp(`\\[${worker.name}\\] helper "far" asks for model "scripted:far\\.yml", which this worker cannot run: .*cannot read script file`))
  })

  it("a root's tree budget travels in the job: the worker's child and its own child are stopped by it on the worker, and the root reads which budget", async () => {
    const server = await redis()
    const budget = 150
    const dir = tempDir()
    const script = join(dir, 'tree.yml')
    const step = '    - { text: "the grandchild works on, one more step of its task", call: { tool: task_list, args: {} } }'
    writeFileSync(script, [
      '- when: { prompt: "grand work" }',
      '  reply:',
      ...Array(40).fill(step),
      '    - text: "grandchild done"',
      '- when: { prompt: "child work" }',
      '  reply:',
      '    - call: { tool: subagent, args: { description: "grandchild", prompt: "grand work" } }',
      '    - text: "child: {{last_tool_result}}"',
      '- when: { depth: 0 }',
      '  reply:',
      '    - call: { tool: subagent_queue, args: { description: "queue child", prompt: "child work" } }',
      '    - text: "root: {{last_tool_result}}"',
    ].join('\n'))
    const worker = await startWorker(server, script)
    const config = configFile(['- id: subagents', '  name: "@dsh/subagent"', `  config: { tree: { budget: { outputTokens: ${budget} } } }`, ...QUEUE_ENTRIES])
    const result = await runDsh(['run', '--config', config, '--permission', 'allow', '--model', `scripted:${script}`, '--session-dir', tempDir(), 'go'], { env: { DSH_REDIS_URL: server.url }, timeoutMs: 60_000 })
    expect(result.code, result.stderr).toBe(0)
    const stored = sessionsIn(worker.sessions)
    const byDepth = (depth: number) => stored.find((lines) => lines[0]!.header!.delegationDepth === depth)!
    // The job's child records what the root's tree left it: all of it, nothing was spent before.
    expect(byDepth(1)[0]!.header!.budget).toEqual({ outputTokens: budget })
    // The worker's own gate stopped the grandchild, counting the job's child too.
    const grandchild = byDepth(2)
    const end = grandchild.findLast((line) => line.type === 'turn/end')!
    expect(end.reason).toBe('budget')
    expect(end.error).toMatch(new RegExp(`^budget: the delegation tree's output-token budget of ${budget} is spent \\(\\d+ output tokens used in this tree, its root included\\); this child was stopped$`))
    expect(byDepth(1).findLast((line) => line.type === 'turn/end')!.reason).toBe('budget')
    const spent = [byDepth(1), grandchild].flat().reduce((sum, line) => sum + (line.type === 'assistant/message' ? (line.usage?.outputTokens ?? 0) : 0), 0)
    expect(spent).toBeGreaterThanOrEqual(budget)
    expect(spent).toBeLessThanOrEqual(budget + 20)
    expect(result.stdout).toMatch(/root: the subagent ended budget: the delegation tree's output-token budget of 150 is spent/)
  })

  it("the usage a parent reads of a queue child is its whole subtree's on the worker: the child's own calls and its children's", async () => {
    const server = await redis()
    const dir = tempDir()
    const script = join(dir, 'usage.yml')
    writeFileSync(script, [
      '- when: { prompt: "grand work" }',
      '  reply:',
      '    - text: "the grandchild answers at some length, so that its tokens are easy to tell apart from the rest"',
      '- when: { prompt: "child work" }',
      '  reply:',
      '    - call: { tool: subagent, args: { description: "grandchild", prompt: "grand work" } }',
      '    - text: "child: {{last_tool_result}}"',
      '- when: { depth: 0 }',
      '  reply:',
      '    - call: { tool: subagent_queue, args: { description: "queue child", prompt: "child work" } }',
      '    - text: "root: {{last_tool_result}}"',
    ].join('\n'))
    const worker = await startWorker(server, script)
    const result = await runDsh(['run', '--config', configFile(QUEUE_ENTRIES), '--json', '--permission', 'allow', '--model', `scripted:${script}`, '--session-dir', tempDir(), 'go'], { env: { DSH_REDIS_URL: server.url } })
    expect(result.code, result.stderr).toBe(0)
    const ended = result.stdout.trim().split('\n').map((line) => JSON.parse(line) as { kind: string; provider?: string; usage?: { outputTokens: number } }).find((record) => record.kind === 'subagent/end' && record.provider === 'queue')
    const spent = sessionsIn(worker.sessions).flat().reduce((sum, line) => sum + (line.type === 'assistant/message' ? (line.usage?.outputTokens ?? 0) : 0), 0)
    const childOnly = sessionsIn(worker.sessions).find((lines) => lines[0]!.header!.delegationDepth === 1)!.reduce((sum, line) => sum + (line.type === 'assistant/message' ? (line.usage?.outputTokens ?? 0) : 0), 0)
    expect(spent).toBeGreaterThan(childOnly)
    expect(ended?.usage?.outputTokens).toBe(spent)
  })

  it("a queue child spending the root's tree budget alone is stopped: its worker holds it to the budget its lineage carries, from its first model call", async () => {
    const server = await redis()
    const budget = 150
    const dir = tempDir()
    const script = join(dir, 'alone.yml')
    // Far more steps than the budget allows, each taking a moment as a model's would.
    const step = '    - { text: "the child works on, one more step of its task", call: { tool: task_list, args: {} }, delay_ms: 100 }'
    writeFileSync(script, ['- when: { prompt: "child work" }', '  reply:', ...Array(100).fill(step), '    - text: "child done"', '- when: { depth: 0 }', '  reply:', '    - call: { tool: subagent_queue, args: { description: "queue child", prompt: "child work" } }', '    - text: "root: {{last_tool_result}}"'].join('\n'))
    const worker = await startWorker(server, script)
    const config = configFile(['- id: subagents', '  name: "@dsh/subagent"', `  config: { tree: { budget: { outputTokens: ${budget} } } }`, ...QUEUE_ENTRIES])
    const result = await runDsh(['run', '--config', config, '--permission', 'allow', '--model', `scripted:${script}`, '--session-dir', tempDir(), 'go'], { env: { DSH_REDIS_URL: server.url }, timeoutMs: 60_000 })
    expect(result.code, result.stderr).toBe(0)
    expect(result.stdout).toMatch(/root: the subagent ended budget: the delegation tree's output-token budget of 150 is spent/)
    const [child] = sessionsIn(worker.sessions)
    expect(child![0]!.header!.budget).toEqual({ outputTokens: budget })
    // Stopped mid-work on the worker, by its own process's gate: its session says why.
    expect(child!.findLast((line) => line.type === 'turn/end')!.reason).toBe('budget')
    expect(child!.filter((line) => line.type === 'assistant/message').length).toBeLessThan(50)
  })

  it("a rule in the root's config denying bash denies it to the job's child on the worker, which would have run it otherwise", async () => {
    const server = await redis()
    const dir = tempDir()
    const script = join(dir, 'rules.yml')
    writeFileSync(script, [
      '- when: { prompt: "^touch it$" }',
      '  reply:',
      `    - call: { tool: bash, args: { command: "touch ${join(dir, 'first')}" } }`,
      '    - text: "child: {{last_tool_result}}"',
      '- when: { prompt: "^again$" }',
      '  reply:',
      `    - call: { tool: bash, args: { command: "touch ${join(dir, 'second')}" } }`,
      '    - text: "child: {{last_tool_result}}"',
    ].join('\n'))
    // The worker's own broker lets commands run: only the root's rules can refuse one.
    const worker = await startWorker(server, script, ['--config', configFile(['- id: approvals', '  name: "@dsh/approvals"', '  config: { default: allow }'])])
    const parentScript = (prompt: string) => {
      const file = join(dir, `parent-${prompt}.yml`)
      writeFileSync(file, ['- when: { depth: 0 }', '  reply:', `    - call: { tool: subagent_queue, args: { description: "queue child", prompt: "${prompt}" } }`, '    - text: "root: {{last_tool_result}}"'].join('\n'))
      return file
    }
    const run = (prompt: string, rules: string[]) =>
      runDsh(['run', '--config', configFile([...rules, ...QUEUE_ENTRIES]), '--permission', 'allow', '--model', `scripted:${parentScript(prompt)}`, '--session-dir', tempDir(), 'go'], { env: { DSH_REDIS_URL: server.url } })
    const allowed = await run('touch it', [])
    expect(allowed.code, allowed.stderr).toBe(0)
    expect(existsSync(join(dir, 'first'))).toBe(true)
    const denied = await run('again', ['- id: approvals', '  name: "@dsh/approvals"', '  config: { deny: [bash] }'])
    expect(denied.code, denied.stderr).toBe(0)
    expect(existsSync(join(dir, 'second'))).toBe(false)
    const child = sessionsIn(worker.sessions).find((lines) => lines.some((line) => line.type === 'user/message' && line.message!.content.some((block) => block.text === 'again')))!
    expect(child[0]!.header!.permissions).toEqual([{ from: 'config', deny: ['bash'] }])
    expect(child.find((line) => line.type === 'tool/result')!.permission).toMatchObject({ decision: 'reject', source: 'rule', rule: 'bash (config)' })
    expect(denied.stdout).toMatch(/root: child: .*bash \(config\)/)
  })

  it('a job whose workers all die while holding it ends error naming each worker that held it, each try recorded as such', async () => {
    const server = await redis()
    const script = workerScript(tempDir())
    const { config, script: parentScript } = parentSetup('answer slowly')
    const parent = runDsh(['run', '--config', config, '--model', `scripted:${parentScript}`, '--session-dir', tempDir(), 'ask a worker'], { env: { DSH_REDIS_URL: server.url }, timeoutMs: 90_000 })
    // Three workers in turn take the job and are killed holding it; the next one started
    // finds it stalled once too often, and BullMQ fails it.
    const holders: Worker[] = []
    let next = await startWorker(server, script)
    for (let i = 0; i < 3; i++) {
      const holder = next
      await until(() => headerWritten(holder.sessions))
      holder.child.kill('SIGKILL')
      holders.push(holder)
      next = await startWorker(server, script)
    }
    const result = await parent
    expect(result.code).toBe(0)
    const held = holders.map((holder, i) => `${holder.name} (try ${i + 1})`).join(', ')
    expect(result.stdout).toContain(`The worker answered: the subagent ended error: the queue job`)
    expect(result.stdout).toContain(`failed: job stalled more than allowable limit; it was held by ${held}, each of which stopped renewing its lock before it finished (the worker died or lost Redis)`)
    expect(holders.map((holder) => sessionsIn(holder.sessions)[0]![0]!.header!.attempt)).toEqual([1, 2, 3])
    // The last worker failed it without running it.
    expect(sessionFiles(next.sessions)).toEqual([])
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
      expect(failed).toMatch(/wire version 99, this worker reads versions 1, 2 and 3/)
      expect((await queue.getJob(job.id!))?.attemptsMade).toBe(1)
    } finally {
      await queue.close()
    }
    const { config, script } = parentSetup('What is the capital of France?')
    const result = await runDsh(['run', '--config', config, '--model', `scripted:${script}`, '--session-dir', tempDir(), 'ask a worker'], { env: { DSH_REDIS_URL: server.url } })
    expect(result.stdout).toContain('The worker answered: Paris is the capital of France.')
  })

  it('with Redis unreachable, a delegation fails with one line naming it and the run still ends; dsh worker does not start, saying why in one line', async () => {
    const { config, script } = parentSetup('What is the capital of France?')
    const nowhere = `unix://${join(tempDir(), 'nothing.sock')}`
    const result = await runDsh(['run', '--config', config, '--model', `scripted:${script}`, '--session-dir', tempDir(), 'ask a worker'], { env: { DSH_REDIS_URL: nowhere } })
    expect(result.stdout).toMatch(/The worker answered: .*Redis at unix:\/\/\S+nothing\.sock \(queue "dsh"\) cannot be reached/)
    expect(result.code).toBe(0)
    // Once serving, a worker waits out a Redis that went away; at its start, it does not wait for one that is not there.
    const worker = await runDsh(['worker', '--model', 'scripted:examples/acp-child.yml', '--session-dir', tempDir()], { env: { DSH_REDIS_URL: nowhere } })
    expect(worker.code).toBe(2)
    expect(worker.stderr.trim().split('\n'), worker.stderr).toHaveLength(1)
    expect(worker.stderr).toMatch(/^dsh worker: Redis at unix:\/\/\S+nothing\.sock cannot be reached: no socket at that path \(connect ENOENT /)
  })

  it('with a queue key, the worker runs what a parent with the same key delegates and refuses, running nothing, what a parent without it does; the parent says why', async () => {
    const server = await redis()
    const key = 'a queue key for this test, 32+ characters'
    const worker = await startWorker(server, workerScript(tempDir()), ['--key-env', 'DSH_QUEUE_KEY'], { DSH_QUEUE_KEY: key })
    expect(worker.stderr()).toContain('only jobs signed with the key in DSH_QUEUE_KEY')
    expect(worker.stderr()).not.toContain(key)
    const signed = parentSetup('What is the capital of France?', '\n    keyEnv: DSH_QUEUE_KEY')
    const ok = await runDsh(['run', '--config', signed.config, '--model', `scripted:${signed.script}`, '--session-dir', tempDir(), 'ask a worker'], { env: { DSH_REDIS_URL: server.url, DSH_QUEUE_KEY: key } })
    expect(ok.stdout).toContain('The worker answered: Paris is the capital of France.')
    const unsigned = parentSetup('What is the capital of Spain?')
    const refused = await runDsh(['run', '--config', unsigned.config, '--model', `scripted:${unsigned.script}`, '--session-dir', tempDir(), 'ask a worker'], { env: { DSH_REDIS_URL: server.url } })
    expect(refused.code).toBe(0)
    expect(refused.stdout).toContain(`[${worker.name}] the job is not signed, and this worker runs only jobs signed with the queue key in DSH_QUEUE_KEY: give the parent's queue provider the same key (keyEnv: DSH_QUEUE_KEY); nothing ran`)
    // One session on the worker: the signed job's.
    expect(sessionFiles(worker.sessions)).toHaveLength(1)
    await until(() => /refused job \S+ of queue dsh: the job is not signed/.test(worker.stderr()))
  })

  it('a --key-env or keyEnv naming an unset variable, or a short key, is a one-line refusal naming the variable, never a run without signatures', async () => {
    const env = { DSH_REDIS_URL: 'redis://127.0.0.1:1' }
    const unset = await runDsh(['worker', '--model', 'scripted:examples/acp-child.yml', '--key-env', 'DSH_NO_SUCH_KEY'], { env })
    expect(unset.code).toBe(2)
    expect(unset.stderr.trim().split('\n')).toEqual([expect.stringMatching(/^dsh worker: --key-env: DSH_NO_SUCH_KEY is not set \(or empty\); export the queue's signing key in it/)])
    const short = await runDsh(['worker', '--model', 'scripted:examples/acp-child.yml', '--key-env', 'DSH_QUEUE_KEY'], { env: { ...env, DSH_QUEUE_KEY: 'hunter2' } })
    expect(short.code).toBe(2)
    expect(short.stderr).toMatch(/^dsh worker: --key-env: DSH_QUEUE_KEY holds a key of 7 characters; a queue signing key needs at least 32/)
    expect(short.stderr).not.toContain('hunter2')
    const { config } = parentSetup('x', '\n    keyEnv: DSH_NO_SUCH_KEY')
    const check = await runDsh(['config', 'check', '--config', config], { env })
    expect(check.code).toBe(2)
    expect(check.stderr).toMatch(/DSH_NO_SUCH_KEY is not set \(or empty\)/)
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
