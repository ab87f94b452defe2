/**
 * One writer per session file, across processes. A process that runs a session holds
 * `<dir>/<id>.lock`, a small JSON file naming it (`pid`, the process's start time where
 * `/proc` tells it, and a random token per storage). Another process, or another storage
 * in the same process, that wants to run the same session finds the lock and is refused
 * with `IN_USE`; a lock whose owner is gone (killed, crashed) is stale and is taken over.
 *
 * The lock is created by writing a private temporary file and hard-linking it to the lock
 * name, which fails atomically when the name exists, so a reader never sees a half-written
 * lock. A stale lock is removed only by the holder of a short-lived takeover mutex
 * (`<id>.lock.takeover`, an atomic mkdir) and only if it is still the lock that was read;
 * the name is then won through the same hard link as a fresh lock, so of any number of
 * processes taking over one stale lock exactly one holds it and the others are refused.
 */
import { randomBytes } from 'node:crypto'
import { link, mkdir, readFile, rmdir, stat, unlink, writeFile } from 'node:fs/promises'
import { unlinkSync } from 'node:fs'
import { join } from 'node:path'
import { errorMessage, isRecord } from '@dsh/base'
import { processAlive, readProcessEntry } from '@dsh/process'
import { SessionJsonlError } from './errors.js'

export const LOCK_FILE_SUFFIX = '.lock'

/** Rounds of "the lock changed under us" before a resume gives up and says so. */
const TAKEOVER_ATTEMPTS = 20
/** A takeover mutex older than this was left by a process that died mid-takeover. */
const ABANDONED_MUTEX_MS = 5_000

/** What a lock file holds. */
interface LockOwner {
  pid: number
  /** The owner's start time in clock ticks after boot (`/proc/<pid>/stat`); absent without `/proc`. */
  startTime?: number
  /** Which storage of that process holds it. */
  token: string
}

/** Locks of every storage in this process, removed if the process exits without releasing them. */
const heldInProcess = new Set<string>()
let exitHooked = false

function rememberForExit(file: string): void {
  if (!exitHooked) {
    exitHooked = true
    process.on('exit', () => {
      for (const held of heldInProcess) {
        try {
          unlinkSync(held)
        } catch {
          // Already removed, or the directory is gone: nothing is left to release.
        }
      }
    })
  }
  heldInProcess.add(file)
}

let ownStartTime: Promise<number | undefined> | undefined

/** The locks one storage (one directory, one process) holds. */
export class SessionLocks {
  private readonly token = randomBytes(8).toString('hex')
  private readonly holding = new Set<string>()
  /** Per id, the last lock operation: taking and giving back one id never overlap. */
  private readonly operations = new Map<string, Promise<void>>()

  constructor(private readonly dir: string) {}

  lockFile(id: string): string {
    return join(this.dir, id + LOCK_FILE_SUFFIX)
  }

  /** Take the lock of session `id` (the id is already validated); a no-op if this storage holds it. */
  acquire(id: string): Promise<void> {
    return this.serialise(id, async () => {
      if (this.holding.has(id)) return
      await this.take(id)
      this.holding.add(id)
    })
  }

  /** Give the lock of `id` back, if this storage holds it. */
  release(id: string): Promise<void> {
    return this.serialise(id, async () => {
      if (!this.holding.delete(id)) return
      const file = this.lockFile(id)
      heldInProcess.delete(file)
      const owner = await readOwner(file).catch(() => undefined)
      if (owner?.token !== this.token) return // removed or replaced by hand meanwhile: not ours to remove
      await unlink(file).catch(() => {
        // Already gone (the directory was removed): the lock is released either way.
      })
    })
  }

  private serialise(id: string, operation: () => Promise<void>): Promise<void> {
    const next = (this.operations.get(id) ?? Promise.resolve()).then(operation)
    const settled = next.catch(() => {
      // The caller of this operation gets its failure; the next operation runs regardless.
    })
    this.operations.set(id, settled)
    void settled.then(() => {
      if (this.operations.get(id) === settled) this.operations.delete(id)
    })
    return next
  }

  private async take(id: string): Promise<void> {
    const file = this.lockFile(id)
    const me: LockOwner = { pid: process.pid, token: this.token }
    const startTime = await (ownStartTime ??= readProcessEntry(process.pid).then((entry) => entry?.startTime))
    if (startTime !== undefined) me.startTime = startTime
    const text = JSON.stringify(me) + '\n'
    const temporary = `${file}.${process.pid}.${this.token}.tmp`
    await writeFile(temporary, text, { mode: 0o600 })
    try {
      for (let attempt = 0; ; attempt++) {
        try {
          await link(temporary, file)
          rememberForExit(file)
          return
        } catch (error) {
          if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error
        }
        const seen = await readFile(file, 'utf8').catch(() => undefined)
        if (seen === undefined) continue // released between our link and our read: try again
        const owner = parseOwner(seen)
        if (owner && (await ownerAlive(owner))) throw inUse(id, file, owner)
        if (attempt > TAKEOVER_ATTEMPTS) throw new SessionJsonlError('IN_USE', `the lock ${file} of session ${id} keeps changing hands; another process is taking it over at the same time; try again`)
        // Stale. Two processes may both have read the same stale lock: only the holder of
        // the takeover mutex (an atomic mkdir) may remove it, and only while it is still
        // the lock both read. The remover then competes for the free name like anyone
        // else, through link() on the next round, which exactly one process wins.
        await removeStaleLock(file, seen)
      }
    } finally {
      await unlink(temporary).catch(() => {
        // Already removed; a leftover temporary file would only be clutter, never a lock.
      })
    }
  }
}

function inUse(id: string, file: string, owner: LockOwner): SessionJsonlError {
  const who = owner.pid === process.pid ? `this process (pid ${owner.pid}, another session store)` : `pid ${owner.pid}`
  return new SessionJsonlError('IN_USE', `session ${id} is in use by ${who} (lock ${file}); wait for that process to finish, or stop it, then resume the session`)
}

async function readOwner(file: string): Promise<LockOwner | undefined> {
  try {
    return parseOwner(await readFile(file, 'utf8'))
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined
    throw new SessionJsonlError('UNREADABLE', `cannot read the session lock ${file}: ${errorMessage(error)}`, { cause: error })
  }
}

/** A lock that does not parse is not anyone's: it was written by something else, or cut short. */
function parseOwner(text: string): LockOwner | undefined {
  let value: unknown
  try {
    value = JSON.parse(text)
  } catch {
    // Not JSON: treated as stale, like a lock whose owner is gone.
    return undefined
  }
  if (!isRecord(value) || !Number.isInteger(value.pid) || (value.pid as number) <= 0 || typeof value.token !== 'string') return undefined
  const owner: LockOwner = { pid: value.pid as number, token: value.token }
  if (Number.isInteger(value.startTime)) owner.startTime = value.startTime as number
  return owner
}

/** The owner still runs: its pid is alive and, where `/proc` can tell, it is the same process (not a reused pid). */
async function ownerAlive(owner: LockOwner): Promise<boolean> {
  if (!(await processAlive(owner.pid))) return false
  if (owner.startTime === undefined) return true
  const entry = await readProcessEntry(owner.pid)
  return entry === undefined || entry.startTime === owner.startTime
}

/**
 * Remove the stale lock `file` if it still holds `seen`, under the takeover mutex
 * `<file>.takeover`. Losing the mutex to another process is not an error: the caller
 * reads the lock again and sees what the winner left.
 */
async function removeStaleLock(file: string, seen: string): Promise<void> {
  const mutex = `${file}.takeover`
  try {
    await mkdir(mutex, { mode: 0o700 })
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error
    const since = await stat(mutex).then((info) => Date.now() - info.mtimeMs, () => 0)
    if (since > ABANDONED_MUTEX_MS) {
      await rmdir(mutex).catch(() => {
        // Another process cleared it first: the next round competes again.
      })
    } else await new Promise((resolve) => setTimeout(resolve, 10))
    return
  }
  try {
    if ((await readFile(file, 'utf8').catch(() => undefined)) === seen) {
      await unlink(file).catch(() => {
        // Gone already: the name is free either way.
      })
    }
  } finally {
    await rmdir(mutex).catch(() => {
      // Removed as abandoned by a process that waited too long: nothing left to release.
    })
  }
}
