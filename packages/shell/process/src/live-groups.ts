/**
 * Every process group this process started and has not yet seen gone. Children are
 * spawned detached (leaders of their own groups) so they can be reaped as a tree; the
 * price is that they outlive us if we exit abruptly (a second Ctrl-C, `process.exit`).
 * On exit, whatever is still tracked gets SIGKILL, synchronously: the last thing a
 * dying process can still do for its children.
 */
const liveGroups = new Set<number>()
let hooked = false

export function trackGroup(pgid: number): () => void {
  if (!hooked) {
    hooked = true
    process.on('exit', killTrackedGroups)
  }
  liveGroups.add(pgid)
  return () => {
    liveGroups.delete(pgid)
  }
}

/** Groups started here and not yet confirmed gone. */
export function trackedGroups(): number[] {
  return [...liveGroups]
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
