import { spawn } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { afterEach, describe, expect, it } from 'vitest'
import {
  childEnvironment,
  goneWithin,
  groupHasLiveMembers,
  processAlive,
  ProcessTree,
  readProcessEntry,
  reapTrackedGroups,
  signalGroup,
  trackedGroups,
  WATCHDOG_GRACE_MS,
  watchdogPid,
} from '@dsh/process'

/** Runs against the built package (`npx tsc -b` first), like the CLI tests. */
const FIXTURE = fileURLToPath(new URL('./fixtures/start-and-wait.mjs', import.meta.url))

const leftovers: number[] = []
afterEach(() => {
  for (const pgid of leftovers.splice(0)) signalGroup(pgid, 'SIGKILL')
})

/** A stand-in for dsh that started `script` as a tracked process group: its pid, the group's and the watchdog's. */
async function standIn(script: string): Promise<{ pid: number; group: number; watchdog: number; exited: Promise<unknown> }> {
  const child = spawn(process.execPath, [FIXTURE, script], { stdio: ['ignore', 'pipe', 'inherit'] })
  const exited = new Promise((resolve) => child.once('exit', resolve))
  const line = await new Promise<string>((resolve, reject) => {
    let text = ''
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
      text += chunk
      if (text.includes('\n')) resolve(text.slice(0, text.indexOf('\n')))
    })
    void exited.then(() => reject(new Error(`the stand-in exited before starting its child: ${text}`)))
  })
  const [, group, , watchdog] = line.split(' ').map(Number)
  leftovers.push(group)
  return { pid: child.pid!, group, watchdog, exited }
}

/** Bounded wait, far above the watchdog's grace, for the machine being busy. */
const WITHIN_MS = WATCHDOG_GRACE_MS + 10_000

describe('after kill -9 of the process that started them', () => {
  it('the watchdog stops its process groups within seconds, then exits itself', async () => {
    const { pid, group, watchdog, exited } = await standIn('sleep 300')
    expect(await processAlive(group)).toBe(true)
    expect(await processAlive(watchdog)).toBe(true)
    process.kill(pid, 'SIGKILL')
    await exited
    expect(await goneWithin(() => groupHasLiveMembers(group), WITHIN_MS)).toBe(true)
    expect(await goneWithin(() => processAlive(watchdog), WITHIN_MS)).toBe(true)
  })

  it('a group that ignores SIGTERM gets SIGKILL after the grace period', async () => {
    const { pid, group, exited } = await standIn('trap "" TERM; sleep 300 & wait; sleep 300')
    process.kill(pid, 'SIGKILL')
    await exited
    expect(await goneWithin(() => groupHasLiveMembers(group), WITHIN_MS)).toBe(true)
  })
})

describe('while the process that started them lives', () => {
  it('the watchdog is not its child, and leaves its groups alone once its launcher is gone', async () => {
    const tree = new ProcessTree({ command: 'sleep', args: ['300'], env: childEnvironment(process.env) })
    leftovers.push(tree.pid!)
    await tree.spawned
    await expect.poll(() => watchdogPid()).toBeDefined()
    const watchdog = watchdogPid()!
    // The launcher (`sh`) exits right after starting it; the watchdog is then re-parented.
    await expect.poll(async () => (await readProcessEntry(watchdog))?.ppid !== process.pid && (await readProcessEntry((await readProcessEntry(watchdog))!.ppid))?.ppid !== process.pid).toBe(true)
    // A watchdog that mistook its launcher's exit for ours would be stopping the group now.
    expect(await goneWithin(() => groupHasLiveMembers(tree.pid!), WATCHDOG_GRACE_MS + 500)).toBe(false)
    expect(await processAlive(watchdog)).toBe(true)
    await tree.reap({ stdinGraceMs: 0, termGraceMs: 0 })
  })
})

describe('reapTrackedGroups', () => {
  it('stops every group this process started and still tracks, and untracks them', async () => {
    const trees = ['sleep 300', 'trap "" TERM; sleep 300 & wait'].map((script) => new ProcessTree({ command: 'sh', args: ['-c', script], env: childEnvironment(process.env) }))
    await Promise.all(trees.map((tree) => tree.spawned))
    const groups = trees.map((tree) => tree.pid!)
    leftovers.push(...groups)
    expect(trackedGroups()).toEqual(expect.arrayContaining(groups))
    expect(await reapTrackedGroups({ graceMs: 200 })).toEqual([])
    for (const group of groups) expect(await groupHasLiveMembers(group)).toBe(false)
    expect(trackedGroups()).not.toEqual(expect.arrayContaining([groups[0]]))
    expect(trackedGroups()).not.toEqual(expect.arrayContaining([groups[1]]))
    await Promise.all(trees.map((tree) => tree.reap({ stdinGraceMs: 0, termGraceMs: 0 })))
  })
})
