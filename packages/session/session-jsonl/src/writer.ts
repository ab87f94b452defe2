import { constants, fstatSync } from 'node:fs'
import { open, readFile, type FileHandle } from 'node:fs/promises'
import { isDeepStrictEqual } from 'node:util'
import { errorMessage } from '@dsh/base'
import type { Session, SessionEvent, SessionHeader, SessionUpdate } from '@dsh/session'
import { CorruptSessionFileError, SessionJsonlError } from './errors.js'
import { assertValidSessionId, readFirstLine, readLastByte } from './files.js'
import { eventLine, headerLine, resumeLine } from './format.js'
import { headerOf, parseLine, parseSessionFile } from './parse.js'

/**
 * How the writer met its session:
 * - `created`: the store announced it. Either it is new (no file yet: write the header)
 *   or it was just resumed from this very file, so the file already holds every event
 *   the session has.
 * - `attached`: it was already live when the plugin started (a reload, a `dir` change).
 *   The file may hold fewer events than the session, so the writer reads it and appends
 *   what is missing.
 */
export type WriterStart = 'created' | 'attached'

const NEWLINE = 0x0a

/**
 * Appends one session's durable events to its file, in order, on one kept-open handle.
 * Events appended in the same tick are written with a single `write`; while a write is in
 * flight the next batch gathers, so there is at most one write in flight and one queued.
 * After the first failure nothing more is written (a later write could land after a
 * partial line); the failure is logged once and rethrown by `close()`.
 */
export class SessionFileWriter {
  private handle: FileHandle | undefined
  private pending: string[] = []
  private firstPendingSeq: number | undefined
  /** Written before the next batch even if it is empty: a new file's header. */
  private preamble = ''
  /** An existing file: before the first new event, end any torn line and write a resume record. */
  private resume: { terminate: boolean } | undefined
  /** Events with a lower seq are known to be in the file. */
  private savedLength: number
  /** The file's size as this writer left it: any other size means someone else wrote. */
  private fileSize = 0
  private flushQueued = false
  private queue: Promise<void>
  private failure: SessionJsonlError | undefined
  private closing: Promise<void> | undefined
  private readonly unsubscribe: () => void

  constructor(
    readonly session: Session,
    readonly file: string,
    private readonly warn: (message: string) => void,
    /** Earlier writers of the same id, still finishing: start after them. */
    after: Promise<void>,
    start: WriterStart,
    /** Take the session's single-writer lock (see session-lock.ts) before touching the file. */
    private readonly lock: () => Promise<void>,
  ) {
    const lengthAtStart = session.length
    this.savedLength = start === 'created' ? lengthAtStart : session.seedLength
    this.unsubscribe = session.subscribe((update) => this.onUpdate(update))
    this.queue = after.then(() => this.start(start, lengthAtStart)).catch((error: unknown) => this.fail(error, 'open'))
    this.scheduleFlush()
  }

  /** Resolves when everything handed to the writer so far has been written (or has failed). */
  idle(): Promise<void> {
    return this.closing?.catch(() => {}) ?? this.queue
  }

  /** Stop listening, write what is pending, sync and close. Rejects with the first failure. */
  close(): Promise<void> {
    this.closing ??= this.finish()
    return this.closing
  }

  private onUpdate(update: SessionUpdate): void {
    // Live streaming fragments are for watchers only; the finished message is an event.
    if (update.type === 'assistant/chunk') return
    this.enqueue(update)
  }

  private enqueue(event: SessionEvent): void {
    if (this.failure) return
    this.firstPendingSeq ??= event.seq
    this.pending.push(eventLine(event))
    this.scheduleFlush()
  }

  private scheduleFlush(): void {
    if (this.flushQueued) return
    this.flushQueued = true
    // Flushed at the end of this turn of the event loop, not at the next microtask: a turn
    // appends its events over many microtasks (a step, the model's reply, its tool calls),
    // and each separate write is a thread-pool round trip.
    this.queue = this.queue.then(endOfLoopTurn).then(() => this.flush())
  }

  private async start(start: WriterStart, lengthAtStart: number): Promise<void> {
    assertValidSessionId(this.session.id)
    await this.lock()
    // A new session's file usually does not exist yet: creating it exclusively tells us so
    // without another round trip for its size.
    const created = start === 'created' ? await openNew(this.file) : undefined
    // Sessions are private: a new file is readable by its owner only.
    const handle = created ?? (await open(this.file, 'a+', 0o600))
    this.handle = handle
    const size = created ? 0 : (await handle.stat()).size
    this.fileSize = size
    if (size === 0) {
      this.preamble = headerLine(this.session.header)
      if (start === 'attached') this.catchUp(this.session.seedLength, lengthAtStart)
      return
    }
    if (start === 'created') {
      this.checkHeader(await this.readHeader(handle))
    } else {
      const stored = parseSessionFile(await readFile(this.file, 'utf8'), this.file, this.session.id)
      this.checkHeader(stored.header)
      const storedLength = this.session.seedLength + stored.events.length
      if (storedLength > lengthAtStart) {
        throw new SessionJsonlError('FOREIGN_FILE', `${this.file} holds ${storedLength} events but the live session ${this.session.id} has ${lengthAtStart}; refusing to append to a file this session did not write`)
      }
      this.savedLength = storedLength
      this.catchUp(storedLength, lengthAtStart)
    }
    this.resume = { terminate: (await readLastByte(handle, size)) !== NEWLINE }
  }

  private async readHeader(handle: FileHandle): Promise<SessionHeader> {
    const first = await readFirstLine(handle)
    const parsed = first && parseLine(first.text)
    if (!parsed?.ok) throw new CorruptSessionFileError(this.file, 1, 'the header line is missing or not valid JSON')
    return headerOf(parsed.value, this.file, this.session.id)
  }

  /** An existing file must belong to this very session, not to an earlier one with the same id. */
  private checkHeader(header: SessionHeader): void {
    if (isDeepStrictEqual(header, JSON.parse(JSON.stringify(this.session.header)))) return
    throw new SessionJsonlError('FOREIGN_FILE', `${this.file} already holds a different session ${this.session.id} (its header differs); refusing to append to it`)
  }

  /** Queue the events `[from, to)` the file is missing, ahead of anything appended since. */
  private catchUp(from: number, to: number): void {
    if (from >= to) return
    this.pending = [...this.session.events(from).slice(0, to - from).map(eventLine), ...this.pending]
    this.firstPendingSeq = from
  }

  private async flush(): Promise<void> {
    this.flushQueued = false
    const handle = this.handle
    if (this.failure || !handle) return
    let text = this.preamble
    if (this.pending.length > 0) {
      if (this.resume) text += (this.resume.terminate ? '\n' : '') + resumeLine(this.firstPendingSeq!)
      this.resume = undefined
      text += this.pending.join('')
    }
    const written = this.pending.length
    this.preamble = ''
    this.pending = []
    this.firstPendingSeq = undefined
    if (!text) return
    try {
      // Another process resuming the same session would interleave its lines with ours
      // and leave a file no one can read back: stop writing instead, and say so.
      // Read synchronously: the inode of an open file is in memory, so this never waits for
      // the disk, while a thread-pool round trip costs more CPU than the write it guards.
      const { size } = fstatSync(handle.fd)
      if (size !== this.fileSize) {
        throw new SessionJsonlError('CONCURRENT_WRITER', `another process appended to it (it grew from ${this.fileSize} to ${size} bytes behind this one); run one process per session`)
      }
      await writeAll(handle, text)
      this.fileSize += Buffer.byteLength(text, 'utf8')
      this.savedLength += written
    } catch (error) {
      this.fail(error, 'append to')
    }
  }

  private async finish(): Promise<void> {
    this.unsubscribe()
    await this.queue
    if (this.handle) {
      try {
        if (!this.failure) await this.handle.datasync()
      } catch (error) {
        this.fail(error, 'sync')
      }
      try {
        await this.handle.close()
      } catch (error) {
        this.fail(error, 'close')
      }
    }
    if (this.failure) throw this.failure
  }

  private fail(error: unknown, action: string): void {
    if (this.failure) return
    const reason = errorMessage(error)
    const code = error instanceof SessionJsonlError ? error.code : 'WRITE_FAILED'
    this.failure = new SessionJsonlError(
      code,
      `cannot ${action} ${this.file} for session ${this.session.id}: ${reason}; events from seq ${this.savedLength} on are not saved`,
      { cause: error },
    )
    this.pending = []
    this.unsubscribe()
    this.warn(this.failure.message)
  }
}

/** Resolves in the check phase of the current event-loop turn (after its pending I/O callbacks). */
function endOfLoopTurn(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve))
}

/** Flags of a file this writer creates itself: append-only, and failing if the name is taken. */
const CREATE_NEW = constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_APPEND

/** Open `file` as a new, private file; `undefined` when it exists already. */
async function openNew(file: string): Promise<FileHandle | undefined> {
  try {
    return await open(file, CREATE_NEW, 0o600)
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'EEXIST') return undefined
    throw error
  }
}

async function writeAll(handle: FileHandle, text: string): Promise<void> {
  const buffer = Buffer.from(text, 'utf8')
  let offset = 0
  while (offset < buffer.length) {
    const { bytesWritten } = await handle.write(buffer, offset, buffer.length - offset, null)
    offset += bytesWritten
  }
}
