/**
 * What `dsh ui` knows of a session directory: each session file parsed once, and again
 * only when that file changes (the directory is watched), so a page of a running tree is
 * kept current without re-reading the other files. A file that cannot be read (corrupt,
 * over `MAX_FILE_BYTES`) is kept as a problem line naming it, never shown as a session and
 * never fatal. Only names that are session ids are ever opened, inside the directory.
 */
import { watch, type FSWatcher } from 'node:fs'
import { readdir, readFile, stat } from 'node:fs/promises'
import { join } from 'node:path'
import { errorMessage } from '@dsh/base'
import type { SessionEvent, SessionHeader } from '@dsh/session'
import { isValidSessionId, parseSessionFile } from '@dsh/session-jsonl'

/** Larger files are listed as a problem instead of being read into memory. */
export const MAX_FILE_BYTES = 64 * 1024 * 1024
const SUFFIX = '.jsonl'

export interface IndexedSession {
  header: SessionHeader
  events: readonly SessionEvent[]
  /** When the file was last read (its mtime). */
  mtimeMs: number
}

export class SessionIndex {
  private readonly sessions = new Map<string, IndexedSession>()
  private readonly problems = new Map<string, string>()
  private readonly listeners = new Set<(id: string) => void>()
  private watcher: FSWatcher | undefined
  private readonly pending = new Map<string, NodeJS.Timeout>()

  constructor(readonly dir: string) {}

  /** Read every session file, then watch the directory for changes. */
  async open(): Promise<void> {
    const names = await readdir(this.dir).catch(() => [] as string[])
    await Promise.all(names.map((name) => this.refresh(name)))
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
  private async refresh(name: string): Promise<string | undefined> {
    if (!name.endsWith(SUFFIX)) return undefined
    const id = name.slice(0, -SUFFIX.length)
    if (!isValidSessionId(id)) return undefined
    const file = join(this.dir, name)
    try {
      const info = await stat(file)
      if (!info.isFile()) return undefined
      if (info.size > MAX_FILE_BYTES) {
        this.problems.set(name, `larger than ${MAX_FILE_BYTES / 1024 / 1024} MB: not shown`)
        this.sessions.delete(id)
        return id
      }
      const stored = parseSessionFile(await readFile(file, 'utf8'), file, id)
      this.sessions.set(id, { header: stored.header, events: stored.events, mtimeMs: info.mtimeMs })
      this.problems.delete(name)
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') {
        this.sessions.delete(id)
        this.problems.delete(name)
      } else {
        this.problems.set(name, errorMessage(error).slice(0, 500))
      }
    }
    return id
  }

  private notify(id: string): void {
    for (const listener of this.listeners) listener(id)
  }
}
