/**
 * Process-group control for commands spawned `detached` (each in its own group, whose id
 * is the shell's pid). Signalling the group reaches every process the command started,
 * however deep, unless one deliberately left the group (`setsid`).
 */
import { readdir, readFile } from 'node:fs/promises'

const POLL_MS = 20
/** After SIGKILL, how long to wait for the kernel to finish tearing processes down. */
const KILL_SETTLE_MS = 5_000

export type GroupSignal = 'SIGTERM' | 'SIGKILL'

/** Send `signal` to every process in group `pgid`; a group already gone is not an error. */
export function signalGroup(pgid: number, signal: GroupSignal): void {
  try {
    process.kill(-pgid, signal)
  } catch (error) {
    // ESRCH: nothing left in the group, which is what we want. Anything else (EPERM) is a real fault.
    if ((error as NodeJS.ErrnoException).code !== 'ESRCH') throw error
  }
}

/**
 * Whether any process of group `pgid` is still running. Zombies do not count: when the
 * shell dies first its children are re-parented to PID 1, and an init that never reaps
 * (common in containers) would otherwise keep a dead group "alive" forever.
 */
export async function groupAlive(pgid: number): Promise<boolean> {
  try {
    process.kill(-pgid, 0)
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code
    if (code === 'ESRCH') return false
    if (code === 'EPERM') return true
    throw error
  }
  if (process.platform !== 'linux') return true
  return (await liveMembers(pgid)) > 0
}

/** Count non-zombie processes in group `pgid` from /proc (Linux). */
async function liveMembers(pgid: number): Promise<number> {
  let count = 0
  const entries = await readdir('/proc').catch(() => [] as string[])
  await Promise.all(
    entries.map(async (entry) => {
      if (!/^\d+$/.test(entry)) return
      const stat = await readFile(`/proc/${entry}/stat`, 'utf8').catch(() => '')
      // Fields after the parenthesised command name: state ppid pgrp ...
      const close = stat.lastIndexOf(')')
      if (close < 0) return
      const [state, , pgrp] = stat.slice(close + 2).split(' ')
      if (Number(pgrp) === pgid && state !== 'Z' && state !== 'X') count++
    }),
  )
  return count
}

/** Resolves `true` once the group is gone, `false` if it is still there after `ms`. */
export async function groupGoneWithin(pgid: number, ms: number): Promise<boolean> {
  const deadline = Date.now() + ms
  for (;;) {
    if (!(await groupAlive(pgid))) return true
    if (Date.now() >= deadline) return false
    await new Promise((resolve) => setTimeout(resolve, POLL_MS))
  }
}

/**
 * Stop a whole group: SIGTERM so processes can clean up, SIGKILL to whatever is left
 * after `graceMs`. Resolves once nothing of the group runs (or, for a process the kernel
 * cannot kill at once, after a bounded wait; `false` then).
 */
export async function terminateGroup(pgid: number, graceMs: number): Promise<boolean> {
  signalGroup(pgid, 'SIGTERM')
  if (await groupGoneWithin(pgid, graceMs)) return true
  signalGroup(pgid, 'SIGKILL')
  return groupGoneWithin(pgid, KILL_SETTLE_MS)
}
