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
import { link, mkdir, open, readFile, rmdir, stat, unlink } from 'node:fs/promises'
import { statSync, unlinkSync } from 'node:fs'
import { join } from 'node:path'
import { isRecord } from '@dsh/base'
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

/**
 * The owner record this storage puts in every lock it takes, written once to a private
 * file (`.<pid>.<token>.<n>.owner` in the directory) and hard-linked to each lock's name:
 * a lock costs one `link` instead of writing, linking and removing a temporary file, and a
 * lock is ours exactly when it is that file (same inode).
 */
interface OwnerRecord {
  file: string
  ino: number
}

/** The locks one storage (one directory, one process) holds. */
export class SessionLocks {
  private readonly token = randomBytes(8).toString('hex')
  /** Held locks by session id, with the inode each was linked from. */
  private readonly holding = new Map<string, number>()
  /** Per id, the last lock operation: taking and giving back one id never overlap. */
  private readonly operations = new Map<string, Promise<void>>()
  /** The owner record in use, written on the first take after none was held. */
  private owner: Promise<OwnerRecord> | undefined
  /** Takes in flight plus locks held: the owner record is removed when this drops to 0. */
  private users = 0
  /** Counts owner records written, so a new one never reuses the name of one being removed. */
  private generation = 0

  constructor(private readonly dir: string) {}

  lockFile(id: string): string {
    return join(this.dir, id + LOCK_FILE_SUFFIX)
  }

  /** Take the lock of session `id` (the id is already validated); a no-op if this storage holds it. */
  acquire(id: string): Promise<void> {
    return this.serialise(id, async () => {
      if (this.holding.has(id)) return
      this.users++
      try {
        this.holding.set(id, await this.take(id))
      } catch (error) {
        await this.dropUser()
        throw error
      }
    })
  }

  /** Give the lock of `id` back, if this storage holds it. */
  release(id: string): Promise<void> {
    return this.serialise(id, async () => {
      const ino = this.holding.get(id)
      if (ino === undefined) return
      this.holding.delete(id)
      const file = this.lockFile(id)
      heldInProcess.delete(file)
      try {
        // Ours exactly when it is still our owner record (a hard link of it): a lock
        // removed or replaced by hand meanwhile is not ours to remove.
        // Read synchronously: the lock's entry was linked by this storage and is cached, so
        // this does not wait for the disk, and a thread-pool round trip costs more CPU than
        // the look-up (a fan-out pays it per child).
        let seen: { ino: number } | undefined
        try {
          seen = statSync(file, { throwIfNoEntry: false })
        } catch {
          // The directory is gone or unreadable: the lock cannot be shown to be ours, so it stays.
          return
        }
        if (seen?.ino !== ino) return
        await unlink(file).catch(() => {
          // Already gone (the directory was removed): the lock is released either way.
        })
      } finally {
        await this.dropUser()
      }
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

  /** The owner record to link, written now if there is none. */
  private ownerRecord(): Promise<OwnerRecord> {
    this.owner ??= this.writeOwnerRecord()
    const pending = this.owner
    // A failed write is not kept: the next take tries again.
    pending.catch(() => {
      if (this.owner === pending) this.owner = undefined
    })
    return pending
  }

  private async writeOwnerRecord(): Promise<OwnerRecord> {
    const me: LockOwner = { pid: process.pid, token: this.token }
    const startTime = await (ownStartTime ??= readProcessEntry(process.pid).then((entry) => entry?.startTime))
    if (startTime !== undefined) me.startTime = startTime
    const file = join(this.dir, `.${process.pid}.${this.token}.${++this.generation}.owner`)
    // Removed at exit like a lock: a process that dies by SIGKILL leaves it (it is never read as a lock).
    rememberForExit(file)
    // The inode is read from the handle that wrote the record: a path could already name
    // nothing (a clean-up of dot-files between the write and a stat).
    const handle = await open(file, 'wx', 0o600)
    try {
      await handle.writeFile(JSON.stringify(me) + '\n')
      return { file, ino: (await handle.stat()).ino }
    } finally {
      await handle.close()
    }
  }

  /** One fewer take or lock; the last one out removes the owner record. */
  private async dropUser(): Promise<void> {
    if (--this.users > 0) return
    const owner = this.owner
    this.owner = undefined
    const record = await owner?.catch(() => undefined)
    if (!record) return
    heldInProcess.delete(record.file)
    await unlink(record.file).catch(() => {
      // Already removed (the directory went away): nothing is left behind.
    })
  }

  /** Link the owner record to the lock's name; returns the inode the lock now shares. */
  private async take(id: string): Promise<number> {
    const file = this.lockFile(id)
    let renewed = false
    for (let attempt = 0; ; attempt++) {
      const pending = this.ownerRecord()
      const owner = await pending
      try {
        await link(owner.file, file)
        rememberForExit(file)
        return owner.ino
      } catch (error) {
        const code = (error as NodeJS.ErrnoException).code
        if (code === 'ENOENT' && !renewed && this.owner === pending) {
          // The record was removed under us (a clean-up of dot-files, the directory made
          // again) while locks were held: write a fresh one, once. Without this, every
          // later session of a long-lived process would fail to open until the last lock
          // went. A second ENOENT means the directory itself is gone: that is reported.
          renewed = true
          heldInProcess.delete(owner.file)
          this.owner = undefined
          continue
        }
        if (code === 'EMLINK' && this.owner !== undefined) {
          // The record has as many links as the file system allows: write a fresh one.
          // The full one stays linked as the locks it is; it is removed by the exit hook.
          this.owner = undefined
          continue
        }
        if (code !== 'EEXIST') throw error
      }
      const seen = await readFile(file, 'utf8').catch(() => undefined)
      if (seen === undefined) continue // released between our link and our read: try again
      const lockOwner = parseOwner(seen)
      if (lockOwner && (await ownerAlive(lockOwner))) throw inUse(id, file, lockOwner)
      if (attempt > TAKEOVER_ATTEMPTS) throw new SessionJsonlError('IN_USE', `the lock ${file} of session ${id} keeps changing hands; another process is taking it over at the same time; try again`)
      // Stale. Two processes may both have read the same stale lock: only the holder of
      // the takeover mutex (an atomic mkdir) may remove it, and only while it is still
      // the lock both read. The remover then competes for the free name like anyone
      // else, through link() on the next round, which exactly one process wins.
      await removeStaleLock(file, seen)
    }
  }
}

function inUse(id: string, file: string, owner: LockOwner): SessionJsonlError {
  const who = owner.pid === process.pid ? `this process (pid ${owner.pid}, another session store)` : `pid ${owner.pid}`
  return new SessionJsonlError('IN_USE', `session ${id} is in use by ${who} (lock ${file}); wait for that process to finish, or stop it, then resume the session`)
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
