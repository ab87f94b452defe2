/**
 * Redis, the parent and three `dsh worker`s, each in its own network namespace made here
 * (`@dsh/testkit/netns`), Redis's namespace linked to each of the others; Redis asks for a
 * password. The parent is killed and resumed across the namespaces too. Everything made
 * is removed at the end, even when the test fails. Where
 * namespaces cannot be made (not root, no `ip`), the test is reported as skipped, with the
 * reason.
 */
import { randomBytes } from 'node:crypto'
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { namespaceProblem, NetworkLab, type SpawnedIn } from '@dsh/testkit/netns'
import { dshBin, repoRoot } from './cli.js'
import { until } from './processes.js'

const problem = namespaceProblem()
const lab = new NetworkLab(213)
const temporary: string[] = []
const password = randomBytes(12).toString('hex')

function tempDir(prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), prefix))
  temporary.push(dir)
  return dir
}

afterAll(() => {
  lab.dispose()
  for (const dir of temporary) rmSync(dir, { recursive: true, force: true })
})

/** Each stored session of a directory: its file name and header. */
function headers(dir: string): Array<{ file: string; header: { parentSession?: string; toolCallId?: string; attempt?: number } }> {
  if (!existsSync(dir)) return []
  return readdirSync(dir)
    .filter((name) => name.endsWith('.jsonl'))
    .map((file) => ({ file, header: (JSON.parse(readFileSync(join(dir, file), 'utf8').split('\n')[0]!) as { header: { parentSession?: string; toolCallId?: string; attempt?: number } }).header }))
}

/** Each stored session of a directory: how its last turn ended. */
function lastEnds(dir: string): string[] {
  if (!existsSync(dir)) return []
  return readdirSync(dir)
    .filter((name) => name.endsWith('.jsonl'))
    .map((name) => readFileSync(join(dir, name), 'utf8').split('\n').filter((line) => line.includes('"type":"turn/end"')).at(-1) ?? '')
    .map((line) => (line ? String((JSON.parse(line) as { reason?: unknown }).reason) : 'running'))
}

describe('queue fan-out over three workers in their own network namespaces', () => {
  it('30 delegations spread over the workers; one SIGKILLed mid-job and all 30 still complete; the parent SIGKILLed mid fan-out and resumed collects every result, no job enqueued twice; a worker without the password is refused in one line; a cancel reaches the workers; the Redis password is in no file or log; nothing is left running', async (context) => {
    if (problem) context.skip(problem)
    const dir = tempDir('dsh-queue-hosts-')
    const redisNs = lab.namespace('redis')
    const parentNs = lab.namespace('parent')
    const parentLink = lab.link(redisNs, parentNs)
    const port = lab.freePort(redisNs)
    const redis = lab.spawnIn(redisNs, 'redis-server', ['--port', String(port), '--bind', '0.0.0.0', '--requirepass', password, '--protected-mode', 'no', '--save', '', '--appendonly', 'no', '--dir', dir])
    await until(
      () => redis.stdout().includes('Ready to accept connections'),
      () => (redis.child.exitCode !== null ? `redis-server exited ${redis.child.exitCode}: ${redis.stdout()}${redis.stderr()}` : undefined),
    )
    const urlVia = (address: string) => `redis://:${password}@${address}:${port}`
    const script = join(dir, 'worker.yml')
    writeFileSync(script, '- when: { prompt: "forever" }\n  reply: [{ text: "never", delay_ms: 60000 }]\n- when: { prompt: "slowly" }\n  reply: [{ text: "a slow answer", delay_ms: 2500 }]\n- reply: [{ text: "done here", delay_ms: 400 }]\n')
    const workers = [1, 2, 3].map((n) => {
      const ns = lab.namespace(`qw${n}`)
      const link = lab.link(redisNs, ns)
      const sessions = tempDir(`dsh-qworker${n}-`)
      const process_: SpawnedIn = lab.spawnIn(ns, process.execPath, [dshBin, 'worker', '--concurrency', '4', '--lock-ms', '1000', '--model', `scripted:${script}`, '--session-dir', sessions], {
        cwd: repoRoot,
        env: { ...process.env, DSH_HOME: tempDir('dsh-home-'), DSH_REDIS_URL: urlVia(link.a) },
      })
      return { ns, sessions, served: process_, redisAddress: link.a }
    })
    for (const worker of workers) {
      await until(
        () => worker.served.stdout().includes('taking jobs'),
        () => (worker.served.child.exitCode !== null ? `a worker exited: ${worker.served.stderr()}` : undefined),
      )
    }
    const config = join(dir, 'queue.yml')
    const writeConfig = (extra: string) =>
      writeFileSync(config, `- id: subagent-queue\n  name: "@dsh/subagent-queue"\n  config: { queue: dsh${extra} }\n- id: tool-subagent-queue\n  name: "@dsh/tool-subagent"\n  config:\n    provider: queue\n    toolName: subagent_queue\n`)
    const parentEnv = { ...process.env, DSH_HOME: tempDir('dsh-home-'), DSH_REDIS_URL: urlVia(parentLink.a) }
    const dshRun = (parentScript: string, sessions: string, extra: string[]) =>
      lab.spawnIn(parentNs, process.execPath, [dshBin, 'run', '--config', config, '--model', `scripted:${parentScript}`, '--session-dir', sessions, '--permission', 'allow', ...extra], { cwd: repoRoot, env: parentEnv })
    const parentRun = (prompt: string, count: number, sessions: string) => {
      const calls = Array.from({ length: count }, (_, i) => `        - { tool: subagent_queue, args: { description: "part ${i}", prompt: "${prompt} ${i}" } }`).join('\n')
      const parentScript = join(dir, `parent-${prompt}.yml`)
      writeFileSync(parentScript, `- when: { depth: 0 }\n  reply:\n    - calls:\n${calls}\n    - text: "all parts collected"\n`)
      return dshRun(parentScript, sessions, ['fan out'])
    }

    // 1. Thirty at once; the first worker to hold a job is killed under it.
    writeConfig('')
    const parentSessions = tempDir('dsh-qparent-')
    const fanout = parentRun('do part', 30, parentSessions)
    await until(
      () => workers.some((worker) => lastEnds(worker.sessions).length > 0),
      () => (fanout.child.exitCode !== null ? `the parent exited early: ${fanout.stderr()}` : undefined),
    )
    const victim = workers.find((worker) => lastEnds(worker.sessions).length > 0)!
    victim.served.child.kill('SIGKILL')
    expect(await fanout.exited, fanout.stderr()).toBe(0)
    expect(fanout.stdout()).toContain('all parts collected')
    const parentLog = readFileSync(join(parentSessions, readdirSync(parentSessions).find((name) => name.endsWith('.jsonl'))!), 'utf8')
    const results = parentLog.split('\n').filter((line) => line.includes('"type":"tool/result"'))
    expect(results).toHaveLength(30)
    for (const line of results) expect(line).toContain('done here')
    const survivors = workers.filter((worker) => worker !== victim)
    // Both survivors took part, and between them finished at least what the victim did not.
    for (const worker of survivors) expect(lastEnds(worker.sessions).filter((end) => end === 'completed').length).toBeGreaterThan(0)
    const finishedBySurvivors = survivors.flatMap((worker) => lastEnds(worker.sessions)).filter((end) => end === 'completed').length
    expect(finishedBySurvivors).toBeGreaterThanOrEqual(30 - lastEnds(victim.sessions).filter((end) => end === 'completed').length)

    // A worker given the URL without the password is refused in one line naming Redis (not the password it lacks).
    const noPassword = lab.spawnIn(victim.ns, process.execPath, [dshBin, 'worker', '--model', `scripted:${script}`, '--session-dir', tempDir('dsh-qworker-')], {
      cwd: repoRoot,
      env: { ...process.env, DSH_HOME: tempDir('dsh-home-'), DSH_REDIS_URL: `redis://${victim.redisAddress}:${port}` },
    })
    expect(await noPassword.exited).toBe(2)
    expect(noPassword.stderr().trim().split('\n'), noPassword.stderr()).toHaveLength(1)
    expect(noPassword.stderr()).toMatch(new RegExp(`^dsh worker: Redis at redis://${victim.redisAddress.replace(/\./g, '\\.')}:${port} cannot be reached: .*NOAUTH`))

    // 2. The parent is SIGKILLed once the workers hold all its jobs, and resumed: taking its
    // interrupted calls up again finds each job (running or finished), and the model
    // collects every answer with task_output.
    const resumable = 4
    const resumeScript = join(dir, 'parent-resume.yml')
    const calls = Array.from({ length: resumable }, (_, i) => `        - { tool: subagent_queue, args: { description: "slow part ${i}", prompt: "answer slowly ${i}" } }`).join('\n')
    const collect = Array.from({ length: resumable }, (_, i) => `    - call: { tool: task_output, args: { task_id: subagent-${i + 1}, wait: true, timeout_ms: 30000 } }\n`).join('')
    writeFileSync(resumeScript, `- when: { depth: 0 }\n  reply:\n    - calls:\n${calls}\n${collect}    - text: "collected"\n${'    - text: "noted"\n'.repeat(2 * resumable)}`)
    const resumeSessions = tempDir('dsh-qparent-')
    const heldBefore = new Set(survivors.flatMap((worker) => headers(worker.sessions).map(({ file }) => `${worker.sessions}/${file}`)))
    const newChildren = () => survivors.flatMap((worker) => headers(worker.sessions).filter(({ file }) => !heldBefore.has(`${worker.sessions}/${file}`)))
    const killed = dshRun(resumeScript, resumeSessions, ['fan out'])
    await until(
      () => newChildren().length === resumable,
      () => (killed.child.exitCode !== null ? `the parent exited before it was killed: ${killed.stderr()}` : undefined),
    )
    killed.child.kill('SIGKILL')
    await killed.exited
    const parentId = readdirSync(resumeSessions).find((name) => name.endsWith('.jsonl'))!.replace(/\.jsonl$/, '')
    const resumed = dshRun(resumeScript, resumeSessions, ['--resume', parentId, 'continue'])
    expect(await resumed.exited, resumed.stderr()).toBe(0)
    expect(resumed.stdout()).toContain('collected')
    const resumedLog = readFileSync(join(resumeSessions, `${parentId}.jsonl`), 'utf8').split('\n')
    const outputs = resumedLog.filter((line) => line.includes('"type":"tool/result"') && line.includes('"name":"task_output"'))
    expect(outputs).toHaveLength(resumable)
    for (const line of outputs) expect(line).toContain('a slow answer')
    // Each job ran once: one child per call on the workers, none of them a second try.
    const children = newChildren()
    expect(children).toHaveLength(resumable)
    expect(children.every(({ header }) => header.parentSession === parentId && header.attempt === 1)).toBe(true)
    expect(new Set(children.map(({ header }) => header.toolCallId)).size).toBe(resumable)

    // 3. A cancel (here the run's timeout) reaches the workers holding the jobs.
    writeConfig(', timeoutMs: 1500')
    const before = survivors.map((worker) => lastEnds(worker.sessions).filter((end) => end === 'aborted').length)
    const cancelled = parentRun('forever', 4, tempDir('dsh-qparent-'))
    expect(await cancelled.exited, cancelled.stderr()).toBe(0)
    await until(() => survivors.reduce((sum, worker, i) => sum + lastEnds(worker.sessions).filter((end) => end === 'aborted').length - before[i]!, 0) === 4)

    // The Redis password reached Redis alone: no session file, job result or log line holds it.
    for (const dir of [parentSessions, resumeSessions, ...workers.map((worker) => worker.sessions)]) {
      for (const name of readdirSync(dir)) expect(readFileSync(join(dir, name), 'utf8'), name).not.toContain(password)
    }
    for (const output of [fanout.stdout(), fanout.stderr(), killed.stderr(), resumed.stdout(), resumed.stderr(), cancelled.stderr(), ...workers.map((worker) => worker.served.stderr() + worker.served.stdout())]) expect(output).not.toContain(password)

    // 4. Workers stop on SIGTERM; nothing is left running in any namespace but Redis's.
    for (const worker of survivors) worker.served.child.kill('SIGTERM')
    for (const worker of survivors) expect(await worker.served.exited).toBe(0)
    for (const ns of [parentNs, ...workers.map((worker) => worker.ns)]) expect(lab.pidsIn(ns), ns).toEqual([])
  }, 120_000)
})
