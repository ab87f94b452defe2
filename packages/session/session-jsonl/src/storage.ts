import { open, readdir, readFile, stat } from 'node:fs/promises'
import { errorMessage } from '@dsh/base'
import { join } from 'node:path'
import type { Logger } from 'cordis'
import type { Session, SessionHeader, SessionObserver, SessionStorage, StoredSession } from '@dsh/session'
import { CorruptSessionFileError, SessionJsonlError } from './errors.js'
import { assertValidSessionId, readFirstLine, SESSION_FILE_SUFFIX, sessionFilePath } from './files.js'
import { headerOf, parseLine, parseSessionFile } from './parse.js'
import { SessionLocks } from './session-lock.js'
import { SessionFileWriter, type WriterStart } from './writer.js'

/** Header reads in flight at once while listing. */
const LIST_CONCURRENCY = 16

/**
 * One directory of `<id>.jsonl` files: the store's storage (read back, list, locate) and
 * its observer (write live sessions).
 */
export class JsonlSessionStorage implements SessionStorage, SessionObserver {
  readonly name = 'jsonl'
  private readonly writers = new Map<Session, SessionFileWriter>()
  /**
   * The same writers by session id (normally one each; a released session's may still be
   * finishing when it is opened again). Looked up per session created and released: a
   * scan of every writer there made a fan-out quadratic in its children.
   */
  private readonly writersById = new Map<string, SessionFileWriter[]>()
  private readonly locks: SessionLocks
  /** Per id, how many `claim()`s are in flight (an open that has not finished). */
  private readonly claims = new Map<string, number>()

  constructor(readonly dir: string, private readonly logger: Logger) {
    this.locks = new SessionLocks(dir)
  }

  /**
   * Hold session `id` for a resume: rejects with `SessionJsonlError('IN_USE')` while
   * another process (or another storage in this one) runs it; a stale lock is taken
   * over. The lock stays while the session is live here, and goes with its release (or
   * with the returned function, when the open fails).
   */
  async claim(id: string): Promise<() => void> {
    assertValidSessionId(id)
    this.claims.set(id, (this.claims.get(id) ?? 0) + 1)
    let done = false
    const finish = () => {
      if (done) return
      done = true
      const left = (this.claims.get(id) ?? 1) - 1
      if (left > 0) this.claims.set(id, left)
      else this.claims.delete(id)
      void this.unlockIfUnused(id)
    }
    try {
      await this.locks.acquire(id)
    } catch (error) {
      finish()
      throw error
    }
    return finish
  }

  locate(id: string): string {
    return sessionFilePath(this.dir, id)
  }

  async read(id: string): Promise<StoredSession | undefined> {
    const file = this.locate(id)
    // A session released a moment ago may still be writing its last events.
    await this.idle(id)
    let text: string
    try {
      // A directory, a FIFO or a device under a session's name would fail or block the read.
      if (!(await stat(file)).isFile()) throw new SessionJsonlError('UNREADABLE', `cannot read session file ${file}: it is not a regular file`)
      text = await readFile(file, 'utf8')
    } catch (error) {
      if (isMissing(error)) return undefined
      if (error instanceof SessionJsonlError) throw error
      throw new SessionJsonlError('UNREADABLE', `cannot read session file ${file}: ${errorMessage(error)}`, { cause: error })
    }
    return parseSessionFile(text, file, id)
  }

  /** Headers of every readable session file, ordered by id (ids are time-ordered). */
  async list(): Promise<SessionHeader[]> {
    // A session created a moment ago may not have its header on disk yet.
    await Promise.all([...this.writers.values()].map((writer) => writer.idle()))
    let entries
    try {
      entries = await readdir(this.dir, { withFileTypes: true })
    } catch (error) {
      if (isMissing(error)) return []
      const code = (error as NodeJS.ErrnoException).code === 'ENOTDIR' ? 'NOT_A_DIRECTORY' : 'UNREADABLE'
      throw new SessionJsonlError(code, `cannot list the session directory ${this.dir}: ${errorMessage(error)}`, { cause: error })
    }
    const ids = entries
      .filter((entry) => !entry.isDirectory() && entry.name.endsWith(SESSION_FILE_SUFFIX))
      .map((entry) => entry.name.slice(0, -SESSION_FILE_SUFFIX.length))
      .sort()
    const headers: (SessionHeader | undefined)[] = new Array(ids.length)
    let next = 0
    const worker = async () => {
      while (next < ids.length) {
        const index = next++
        headers[index] = await this.readHeader(ids[index])
      }
    }
    await Promise.all(Array.from({ length: Math.min(LIST_CONCURRENCY, ids.length) }, worker))
    return headers.filter((header): header is SessionHeader => header !== undefined)
  }

  created(session: Session): void {
    this.attach(session, 'created')
  }

  /** Start writing a live session (see `WriterStart`). */
  attach(session: Session, start: WriterStart = 'attached'): void {
    if (this.writers.has(session)) return
    const file = join(this.dir, session.id + SESSION_FILE_SUFFIX) // the id is checked before the file is opened
    const lock = () => this.locks.acquire(session.id)
    const writer = new SessionFileWriter(session, file, (message) => this.logger.warn(message), this.idle(session.id), start, lock)
    this.writers.set(session, writer)
    const same = this.writersById.get(session.id)
    if (same) same.push(writer)
    else this.writersById.set(session.id, [writer])
  }

  async released(session: Session): Promise<void> {
    const writer = this.writers.get(session)
    if (!writer) return
    try {
      await writer.close()
    } finally {
      this.writers.delete(session)
      this.forgetWriter(session.id, writer)
      await this.unlockIfUnused(session.id)
    }
  }

  private forgetWriter(id: string, writer: SessionFileWriter): void {
    const same = this.writersById.get(id)
    if (!same) return
    const rest = same.filter((entry) => entry !== writer)
    if (rest.length > 0) this.writersById.set(id, rest)
    else this.writersById.delete(id)
  }

  /** Give the lock of `id` back once no live session and no open in flight needs it. */
  private async unlockIfUnused(id: string): Promise<void> {
    if (this.claims.has(id) || this.writersById.has(id)) return
    await this.locks.release(id).catch((error: unknown) => {
      // Nothing is lost if a lock cannot be removed: the next process sees its owner gone.
      this.logger.warn('cannot remove the lock of session %s: %s', id, errorMessage(error))
    })
  }

  /** Flush and close every writer (plugin unload). Failures were already logged when they happened. */
  async closeAll(): Promise<void> {
    await Promise.all(
      [...this.writers.keys()].map((session) =>
        this.released(session).catch(() => {
          // Logged by the writer when it failed; an unload has no caller to hand it to.
        }),
      ),
    )
  }

  private idle(id: string): Promise<void> {
    const same = this.writersById.get(id)
    // A new session's id has no writer yet: nothing to wait for.
    if (!same) return Promise.resolve()
    return Promise.all(same.map((writer) => writer.idle())).then(() => {})
  }

  private async readHeader(id: string): Promise<SessionHeader | undefined> {
    const file = join(this.dir, id + SESSION_FILE_SUFFIX)
    try {
      assertValidSessionId(id)
      const handle = await open(file, 'r')
      try {
        const first = await readFirstLine(handle)
        const parsed = first && parseLine(first.text)
        if (!parsed) throw new CorruptSessionFileError(file, 1, 'the file is empty; it has no header line')
        if (!parsed.ok) throw new CorruptSessionFileError(file, 1, `the header line is not valid JSON (${parsed.error})`)
        return headerOf(parsed.value, file, id)
      } finally {
        await handle.close()
      }
    } catch (error) {
      this.logger.warn('%s is left out of the session list: %s', file, errorMessage(error))
      return undefined
    }
  }
}

function isMissing(error: unknown): boolean {
  return (error as NodeJS.ErrnoException | undefined)?.code === 'ENOENT'
}
