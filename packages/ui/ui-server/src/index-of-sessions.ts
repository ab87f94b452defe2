/**
 * What `dsh ui` knows of a session directory: each session file parsed once, and again
 * only when that file changes (the directory is watched), so a page of a running tree is
 * kept current without re-reading the other files. A file that cannot be read (corrupt,
 * not a regular file) is kept as a problem line naming it, never shown as a session and
 * never fatal. Only names that are session ids are ever opened, inside the directory, and
 * only as regular files: a symbolic link is never followed (the open itself refuses it, so
 * a link swapped in after a check gains nothing), so a session name cannot read a file
 * elsewhere.
 *
 * Memory is bounded by construction: at most `fileBytes` of one file and `totalBytes` of
 * all of them are read and held. A larger file is read up to its last whole line within the
 * bound and shown as truncated (`IndexedSession.truncated`); once the whole bound is held,
 * further files are listed as not read, saying so.
 */
import { constants, watch, type FSWatcher } from 'node:fs'
import { open, readdir, type FileHandle } from 'node:fs/promises'
import { join } from 'node:path'
import { errorMessage } from '@dsh/base'
import type { SessionEvent, SessionHeader } from '@dsh/session'
import { isValidSessionId, parseSessionFile } from '@dsh/session-jsonl'

/** The most of one session file read: a larger one is shown as its first whole lines within it, truncated. */
export const MAX_FILE_BYTES = 16 * 1024 * 1024
/** The most of all session files read and held together. */
export const MAX_TOTAL_BYTES = 128 * 1024 * 1024
const SUFFIX = '.jsonl'

export interface IndexLimits {
  /** Defaults to `MAX_FILE_BYTES`. */
  fileBytes?: number
  /** Defaults to `MAX_TOTAL_BYTES`. */
  totalBytes?: number
}

export interface IndexedSession {
  header: SessionHeader
  events: readonly SessionEvent[]
  /** When the file was last read (its mtime). */
  mtimeMs: number
  /** Bytes of the file read and held. */
  bytes: number
  /** Set when the file was larger than what was read: only its first `readBytes` of `sizeBytes` are shown. */
  truncated?: { readBytes: number; sizeBytes: number }
}

/** Megabytes, for a person. */
export function megabytes(bytes: number): string {
  const mb = bytes / 1024 / 1024
  return `${mb >= 10 || Number.isInteger(mb) ? Math.round(mb) : mb.toFixed(1)} MB`
}

export class SessionIndex {
  private readonly sessions = new Map<string, IndexedSession>()
  private readonly problems = new Map<string, string>()
  private readonly listeners = new Set<(id: string) => void>()
  private watcher: FSWatcher | undefined
  private readonly pending = new Map<string, NodeJS.Timeout>()
  private readonly fileBytes: number
  private readonly totalBytes: number
  /** Bytes held by every session read. */
  private held = 0
  /** Reads one after another, so each sees what the others hold. */
  private reads: Promise<unknown> = Promise.resolve()

  constructor(
    readonly dir: string,
    limits: IndexLimits = {},
  ) {
    this.fileBytes = limits.fileBytes ?? MAX_FILE_BYTES
    this.totalBytes = limits.totalBytes ?? MAX_TOTAL_BYTES
  }

  /** Read every session file (newest names last is as good as any order: each is read once), then watch the directory for changes. */
  async open(): Promise<void> {
    const names = await readdir(this.dir).catch(() => [] as string[])
    for (const name of names) await this.refresh(name)
    this.watcher = watch(this.dir, (_event, name) => {
      if (typeof name !== 'string' || !name.endsWith(SUFFIX)) return
      // A writer appends event by event: read a file once its burst is over.
      clearTimeout(this.pending.get(name))
      this.pending.set(
        name,
        setTimeout(() => {
          this.pending.delete(name)
          void this.refresh(name).then((id) => id && this.notify(id))
        }, 50),
      )
    })
    this.watcher.on('error', () => {
      // The directory went away: the page keeps what it had.
    })
  }

  close(): void {
    this.watcher?.close()
    for (const timer of this.pending.values()) clearTimeout(timer)
    this.pending.clear()
  }

  /** Hear the id of each session whose file changed. */
  onChange(listener: (id: string) => void): () => void {
    this.listeners.add(listener)
    return () => this.listeners.delete(listener)
  }

  get(id: string): IndexedSession | undefined {
    return isValidSessionId(id) ? this.sessions.get(id) : undefined
  }

  all(): IndexedSession[] {
    return [...this.sessions.values()]
  }

  /** Files that could not be read, each with its reason. */
  unreadable(): Array<{ file: string; problem: string }> {
    return [...this.problems].map(([file, problem]) => ({ file, problem }))
  }

  /** Re-read one file; the session id it holds, when it is one. */
  private refresh(name: string): Promise<string | undefined> {
    const read = this.reads.then(() => this.read(name))
    this.reads = read.catch(() => undefined)
    return read
  }

  private async read(name: string): Promise<string | undefined> {
    if (!name.endsWith(SUFFIX)) return undefined
    const id = name.slice(0, -SUFFIX.length)
    if (!isValidSessionId(id)) return undefined
    const file = join(this.dir, name)
    // What this file holds now is given back when it is read again or refused; a read that fails keeps it.
    const before = this.sessions.get(id)?.bytes ?? 0
    let handle: FileHandle | undefined
    try {
      // No symbolic link is followed, and a FIFO named like a session does not block the read.
      handle = await open(file, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK)
      const info = await handle.stat()
      if (!info.isFile()) {
        this.forget(id)
        this.problems.set(name, 'not a regular file: not read')
        return id
      }
      const room = Math.min(this.fileBytes, this.totalBytes - (this.held - before))
      const whole = info.size <= room
      const text = await readHead(handle, whole ? info.size : Math.max(room, 0))
      // Cut to whole lines: a line cut by the bound is not a torn tail.
      const kept = whole ? text : text.slice(0, text.lastIndexOf('\n') + 1)
      if (kept.length === 0 && info.size > 0) {
        this.forget(id)
        this.problems.set(
          name,
          room < this.fileBytes
            ? `not read: the sessions read already hold the whole bound of ${megabytes(this.totalBytes)} (dsh ui reads at most that much of a directory)`
            : `not read: its first line is longer than the ${megabytes(this.fileBytes)} dsh ui reads of one file`,
        )
        return id
      }
      const stored = parseSessionFile(kept, file, id)
      const bytes = Buffer.byteLength(kept)
      this.forget(id)
      this.sessions.set(id, { header: stored.header, events: stored.events, mtimeMs: info.mtimeMs, bytes, ...(!whole && { truncated: { readBytes: bytes, sizeBytes: info.size } }) })
      this.held += bytes
      this.problems.delete(name)
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code
      if (code === 'ENOENT' || code === 'ELOOP') this.forget(id)
      if (code === 'ENOENT') this.problems.delete(name)
      else if (code === 'ELOOP') this.problems.set(name, 'a symbolic link: not followed (only regular files in the session directory are read)')
      else this.problems.set(name, errorMessage(error).slice(0, 500))
    } finally {
      await handle?.close()
    }
    return id
  }

  private forget(id: string): void {
    const held = this.sessions.get(id)
    if (held === undefined) return
    this.held -= held.bytes
    this.sessions.delete(id)
  }

  private notify(id: string): void {
    for (const listener of this.listeners) listener(id)
  }
}

/** The first `length` bytes of an open file, as text. */
async function readHead(handle: FileHandle, length: number): Promise<string> {
  const buffer = Buffer.alloc(length)
  let filled = 0
  while (filled < length) {
    const { bytesRead } = await handle.read(buffer, filled, length - filled, filled)
    if (bytesRead === 0) break
    filled += bytesRead
  }
  return buffer.toString('utf8', 0, filled)
}
