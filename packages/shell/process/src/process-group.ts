/**
 * Stopping a process group, or anything shaped like one: SIGTERM so processes can clean
 * up, then SIGKILL to whatever is left after a grace period, then a bounded wait for the
 * kernel. A child spawned `detached` leads a new group (pgid = its pid), so one signal to
 * `-pgid` reaches everything it started, unless a descendant deliberately left the group.
 */
import { groupHasLiveMembers } from './process-liveness.js'

export type StopSignal = 'SIGTERM' | 'SIGKILL'

/** After SIGKILL, how long to wait for the kernel to finish tearing processes down. */
export const KILL_WAIT_MS = 5_000
const POLL_MS = 20

/** What `terminate` stops: signalled as a unit, and asked whether anything of it still runs. */
export interface Terminable {
  signal(signal: StopSignal): void | Promise<void>
  alive(): Promise<boolean>
}

/** Send `signal` to every process in group `pgid`; a group already gone is not an error. */
export function signalGroup(pgid: number, signal: StopSignal): void {
  try {
    process.kill(-pgid, signal)
  } catch (error) {
    // ESRCH: nothing left in the group, which is what we want. Anything else (EPERM: no
    // member may be signalled by us) is a real fault, for the caller to report.
    if ((error as NodeJS.ErrnoException).code !== 'ESRCH') throw error
  }
}

/** Send `signal` to one process that may already be gone. */
export function signalProcess(pid: number, signal: StopSignal): void {
  try {
    process.kill(pid, signal)
  } catch (error) {
    // ESRCH: already gone. EPERM: the pid now names someone else's process; leave it alone.
    const code = (error as NodeJS.ErrnoException).code
    if (code !== 'ESRCH' && code !== 'EPERM') throw error
  }
}

/** Resolves `true` once `alive()` says no, `false` if it still says yes after `ms`. */
export async function goneWithin(alive: () => Promise<boolean>, ms: number): Promise<boolean> {
  const deadline = Date.now() + ms
  for (;;) {
    if (!(await alive())) return true
    if (Date.now() >= deadline) return false
    await new Promise((resolve) => setTimeout(resolve, POLL_MS))
  }
}

/**
 * SIGTERM → `graceMs` → SIGKILL → at most `KILL_WAIT_MS`. Resolves `true` once nothing of
 * `target` runs, `false` when something outlived SIGKILL (a process in uninterruptible
 * sleep); rejects only when signalling fails.
 */
export async function terminate(target: Terminable, graceMs: number): Promise<boolean> {
  await target.signal('SIGTERM')
  if (await goneWithin(() => target.alive(), graceMs)) return true
  await target.signal('SIGKILL')
  return goneWithin(() => target.alive(), KILL_WAIT_MS)
}

/** `terminate` for process group `pgid`: done once the group has no live (non-zombie) member. */
export function terminateGroup(pgid: number, graceMs: number): Promise<boolean> {
  return terminate({ signal: (signal) => signalGroup(pgid, signal), alive: () => groupHasLiveMembers(pgid) }, graceMs)
}
