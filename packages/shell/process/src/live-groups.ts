/**
 * Every process group this process started and has not yet seen gone. Children are
 * spawned detached (leaders of their own groups) so they can be reaped as a tree; the
 * price is that they outlive us if we exit abruptly. Three nets catch them:
 *
 * - `reapTrackedGroups()`, for a process that is told to stop (SIGTERM, SIGINT): SIGTERM
 *   to every group, SIGKILL after a grace period, resolved once they are gone;
 * - on `exit` (a second Ctrl-C, `process.exit`), SIGKILL to whatever is still tracked,
 *   synchronously: the last thing a dying process can still do for its children;
 * - the watchdog (see watchdog.ts), for a death with no last words (SIGKILL, a crash).
 */
import { terminateGroup } from './process-group.js'
import { tellWatchdog } from './watchdog.js'

const liveGroups = new Set<number>()
let hooked = false

export function trackGroup(pgid: number): () => void {
  if (!hooked) {
    hooked = true
    process.on('exit', killTrackedGroups)
  }
  liveGroups.add(pgid)
  tellWatchdog('+', pgid)
  return () => {
    if (liveGroups.delete(pgid)) tellWatchdog('-', pgid)
  }
}

/** Groups started here and not yet confirmed gone. */
export function trackedGroups(): number[] {
  return [...liveGroups]
}

export interface ReapTrackedOptions {
  /** After SIGTERM, how long the groups may take to exit before SIGKILL. Default 2000 ms. */
  graceMs?: number
}

/**
 * Stop every group this process started and still tracks, all at once: SIGTERM →
 * `graceMs` → SIGKILL → at most `KILL_WAIT_MS`. Resolves with the pgids that still have
 * live members after that (normally none); never rejects, since it runs on the way out,
 * where nobody could handle a failure. A group that may not be signalled (`EPERM`) counts
 * as surviving.
 */
export async function reapTrackedGroups(options: ReapTrackedOptions = {}): Promise<number[]> {
  const graceMs = options.graceMs ?? 2_000
  const groups = [...liveGroups]
  const gone = await Promise.all(groups.map((pgid) => terminateGroup(pgid, graceMs).catch(() => false)))
  const survivors: number[] = []
  groups.forEach((pgid, index) => {
    if (!gone[index]) survivors.push(pgid)
    else if (liveGroups.delete(pgid)) tellWatchdog('-', pgid)
  })
  return survivors
}

function killTrackedGroups(): void {
  for (const pgid of liveGroups) {
    try {
      process.kill(-pgid, 'SIGKILL')
    } catch {
      // ESRCH: already gone; EPERM: not ours to signal any more. Nothing else can be done at exit.
    }
  }
  liveGroups.clear()
}
