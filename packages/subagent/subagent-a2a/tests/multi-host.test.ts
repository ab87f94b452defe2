/**
 * The parent and three workers, each in its own network namespace made here
 * (`@dsh/testkit/netns`), joined by veth pairs with addresses assigned here (10.211.N.1
 * for the parent's end, 10.211.N.2 for worker N's). Everything made is removed at the
 * end, even when the test fails.
 * Where namespaces cannot be made (not root, no `ip`), the test is reported as skipped,
 * with the reason.
 */
import { execFileSync } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { afterAll, describe, expect, it } from 'vitest'
import { namespaceProblem, NetworkLab, type SpawnedIn } from '@dsh/testkit/netns'

const here = dirname(fileURLToPath(import.meta.url))
const repoRoot = resolve(here, '../../../..')
const dshMain = join(repoRoot, 'packages/cli/dsh/dist/main.js')
const parentScript = join(here, 'fixtures/fanout-parent.mjs')
const TOKEN_ENV = 'DSH_MULTI_HOST_TOKEN'
const token = randomBytes(16).toString('hex')

const lab = new NetworkLab(211)
const temporary: string[] = []

function tempDir(prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), prefix))
  temporary.push(dir)
  return dir
}

afterAll(() => {
  lab.dispose()
  for (const dir of temporary) rmSync(dir, { recursive: true, force: true })
})

const namespace = (name: string) => lab.namespace(name)
/** A veth pair between the parent namespace and a worker's; the worker end's address. */
const link = (parent: string, worker: string) => lab.link(parent, worker).b
const pidsIn = (ns: string) => lab.pidsIn(ns)

function spawnIn(ns: string, args: string[], env: NodeJS.ProcessEnv = {}): SpawnedIn {
  return lab.spawnIn(ns, process.execPath, args, { cwd: repoRoot, env: { ...process.env, DSH_HOME: tempDir('dsh-home-'), [TOKEN_ENV]: token, ...env } })
}

async function until(ready: () => boolean, gaveUp: () => string | undefined = () => undefined): Promise<void> {
  while (!ready()) {
    const reason = gaveUp()
    if (reason !== undefined) throw new Error(reason)
    await new Promise((resolvePromise) => setTimeout(resolvePromise, 20))
  }
}

interface ParentEvent {
  event: 'started' | 'settled' | 'done'
  n?: number
  stopReason?: string
  diagnostic?: string
  output?: string
}

function eventsOf(parent: SpawnedIn): ParentEvent[] {
  return parent
    .stdout()
    .split('\n')
    .filter((line) => line.startsWith('{'))
    .map((line) => JSON.parse(line) as ParentEvent)
}

/** Each stored session of a worker: its header and how its last turn ended. */
function storedSessions(dir: string): Array<{ id?: string; parentSession?: string; delegationDepth?: number; provider?: string; lastEnd?: string }> {
  return readdirSync(dir)
    .filter((name) => name.endsWith('.jsonl'))
    .map((name) => {
      const records = readFileSync(join(dir, name), 'utf8').split('\n').filter(Boolean).map((line) => JSON.parse(line) as Record<string, unknown>)
      const header = (records.find((record) => record.kind === 'header') as { header?: Record<string, unknown> } | undefined)?.header ?? {}
      const ends = records.filter((record) => record.type === 'turn/end').map((record) => String(record.reason))
      return { ...(header as { id?: string; parentSession?: string; delegationDepth?: number; provider?: string }), lastEnd: ends.at(-1) }
    })
}

const problem = namespaceProblem()

describe('a2a fan-out over three workers in their own network namespaces', () => {
  it('spreads 30 tasks over three workers; a worker killed mid-task fails only its runs; a cancel in the parent reaches the workers; nothing is left running', async (context) => {
    if (problem) context.skip(problem)
    const dir = tempDir('dsh-multi-host-')
    const quick = join(dir, 'quick.yml')
    writeFileSync(quick, '- when: { prompt: "slow" }\n  reply: [{ text: "never", delay_ms: 60000 }]\n- reply: [{ text: "done here", delay_ms: 150 }]\n')
    const stuck = join(dir, 'stuck.yml')
    writeFileSync(stuck, '- reply: [{ text: "never", delay_ms: 60000 }]\n')

    const parentNs = namespace('parent')
    const workers = [1, 2, 3].map((n) => {
      const ns = namespace(`w${n}`)
      const address = link(parentNs, ns)
      const sessions = tempDir(`dsh-worker${n}-`)
      const served = spawnIn(ns, [dshMain, 'a2a', 'serve', '--host', address, '--port', '7700', '--token-env', TOKEN_ENV, '--max-tasks', '12', '--model', `scripted:${n === 3 ? stuck : quick}`, '--session-dir', sessions])
      return { ns, url: `http://${address}:7700`, sessions, served }
    })
    for (const worker of workers) {
      await until(
        () => worker.served.stdout().includes(worker.url),
        () => (worker.served.child.exitCode !== null ? `worker ${worker.url} exited: ${worker.served.stderr()}` : undefined),
      )
    }

    // 1. Thirty tasks at once; worker 3 never finishes its ten and is killed under them.
    const fanout = spawnIn(parentNs, [parentScript, JSON.stringify({ urls: workers.map((worker) => worker.url), tokenEnv: TOKEN_ENV, count: 30, prompt: 'task' })])
    await until(
      // Ten sessions with their headers written: a kill between a file's creation and its first
      // write (appends go out at the end of the event-loop turn) leaves it empty.
      () => eventsOf(fanout).filter((event) => event.event === 'started').length === 30 && storedSessions(workers[2]!.sessions).filter((session) => session.parentSession !== undefined).length === 10,
      () => (fanout.child.exitCode !== null ? `the parent exited early: ${fanout.stderr()}` : undefined),
    )
    workers[2]!.served.child.kill('SIGKILL')
    await until(() => eventsOf(fanout).some((event) => event.event === 'done'), () => (fanout.child.exitCode !== null && !eventsOf(fanout).some((event) => event.event === 'done') ? `the parent exited: ${fanout.stderr()}` : undefined))
    expect(await fanout.exited).toBe(0)
    const settled = eventsOf(fanout).filter((event) => event.event === 'settled')
    expect(settled).toHaveLength(30)
    const failed = settled.filter((event) => event.stopReason === 'error')
    const completed = settled.filter((event) => event.stopReason === 'completed')
    expect(failed).toHaveLength(10)
    expect(completed).toHaveLength(20)
    for (const event of failed) expect(event.diagnostic).toContain(workers[2]!.url)
    for (const event of completed) expect(event.output).toBe('done here')
    // Spread least busy first: ten each; every session records the parent's lineage.
    expect(workers.map((worker) => storedSessions(worker.sessions).length)).toEqual([10, 10, 10])
    for (const session of storedSessions(workers[0]!.sessions)) expect(session).toMatchObject({ delegationDepth: 1, provider: 'a2a', lastEnd: 'completed' })
    // On each worker, `dsh sessions tree` lists all ten of its sessions under the parent's session, stored elsewhere.
    for (const worker of workers) {
      const stored = storedSessions(worker.sessions)
      const parents = new Set(stored.map((session) => session.parentSession))
      expect(parents.size).toBe(1)
      const tree = execFileSync(process.execPath, [dshMain, 'sessions', 'tree', '--session-dir', worker.sessions], { encoding: 'utf8', env: { ...process.env, DSH_HOME: tempDir('dsh-home-') } })
      const lines = tree.trimEnd().split('\n')
      expect(lines[0]).toBe(`${[...parents][0]}  (stored elsewhere; 10 sessions here)`)
      expect(lines).toHaveLength(11)
      for (const session of stored) expect(lines.some((line) => line.startsWith(`├─ ${session.id}  a2a "task `) || line.startsWith(`└─ ${session.id}  a2a "task `))).toBe(true)
      if (worker !== workers[2]) for (const line of lines.slice(1)) expect(line).toMatch(/ {2}a2a "task \d+" {2}completed {2}\(depth 1\)$/)
    }

    // 2. A cancel in the parent reaches the (remaining) workers: their turns end aborted.
    const cancelling = spawnIn(parentNs, [parentScript, JSON.stringify({ urls: workers.slice(0, 2).map((worker) => worker.url), tokenEnv: TOKEN_ENV, count: 4, prompt: 'slow' })])
    const slowSessions = () => workers.slice(0, 2).flatMap((worker) => storedSessions(worker.sessions)).filter((session) => session.lastEnd === undefined)
    await until(() => eventsOf(cancelling).filter((event) => event.event === 'started').length === 4 && slowSessions().length === 4)
    cancelling.child.stdin!.write('cancel\n')
    expect(await cancelling.exited).toBe(0)
    expect(eventsOf(cancelling).filter((event) => event.event === 'settled').map((event) => event.stopReason)).toEqual(['aborted', 'aborted', 'aborted', 'aborted'])
    const aborted = () => workers.slice(0, 2).flatMap((worker) => storedSessions(worker.sessions)).filter((session) => session.lastEnd === 'aborted').length
    await until(() => aborted() === 4)

    // 3. Nothing is left running: the workers stop on SIGTERM, and every namespace is empty.
    for (const worker of workers.slice(0, 2)) worker.served.child.kill('SIGTERM')
    expect(await Promise.all(workers.slice(0, 2).map((worker) => worker.served.exited))).toEqual([0, 0])
    for (const ns of [parentNs, ...workers.map((worker) => worker.ns)]) expect(pidsIn(ns)).toEqual([])
  })
})
