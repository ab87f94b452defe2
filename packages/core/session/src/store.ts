import { randomBytes } from 'node:crypto'
import { Context, Service } from 'cordis'
import Schema from 'schemastery'
import { errorMessage } from '@dsh/base'
import { SessionError } from './errors.js'
import type { DelegationBudget, HelperRef, PermissionLevel, SandboxSpec, SessionEvent, SessionHeader, TraceContext, WorkspaceRef } from './events.js'
import { Session } from './session.js'

declare module 'cordis' {
  interface Context {
    sessions: SessionStore
  }
}

/** What a persistence plugin hears about: a new live session, and its release. */
export interface SessionObserver {
  created?(session: Session): void
  /** Awaited by `release()`: flush whatever is pending for this session. */
  released?(session: Session): Promise<void> | void
}

/** A session as read back from storage: its header and its own events (not its seed). */
export interface StoredSession {
  header: SessionHeader
  events: SessionEvent[]
  /** Human-readable notes about recovery (e.g. a torn last line that was dropped). */
  warnings: string[]
}

/** Durable storage behind `ctx.sessions.open()` and `listStored()`. One per context. */
export interface SessionStorage {
  readonly name: string
  read(id: string): Promise<StoredSession | undefined>
  list(): Promise<SessionHeader[]>
  /** Where a session lives, for people (a file path). */
  locate(id: string): string
  /**
   * Hold `id` for a resume before it is read: rejects when another process runs it (the
   * storage's single-writer rule). The returned function is called once the open has
   * finished, whether or not it succeeded; a session made live stays held until released.
   */
  claim?(id: string): Promise<() => void>
}

export interface SessionInit {
  /** Defaults to a fresh, time-ordered id. */
  id?: string
  cwd?: string
  parentSession?: string
  origin?: string
  delegationDepth?: number
  /** See `SessionHeader.maxDepth`. */
  maxDepth?: number
  provider?: string
  label?: string
  /** See `SessionHeader.toolCallId`. */
  toolCallId?: string
  /** See `SessionHeader.descriptor`. */
  descriptor?: Readonly<Record<string, unknown>>
  /** See `SessionHeader.helper`. */
  helper?: HelperRef
  /** See `SessionHeader.trace`. */
  trace?: TraceContext
  /** See `SessionHeader.attempt`. */
  attempt?: number
  /** See `SessionHeader.permissions`. */
  permissions?: readonly PermissionLevel[]
  /** See `SessionHeader.budget`. */
  budget?: DelegationBudget
  /** See `SessionHeader.approvalDefault`. */
  approvalDefault?: 'allow' | 'reject'
  /** See `SessionHeader.workspace`. */
  workspace?: WorkspaceRef
  /** See `SessionHeader.sandbox`. */
  sandbox?: SandboxSpec
  /** Share the first `length` events of `session` as this session's history (fork). */
  seed?: { session: Session; length: number }
  /**
   * `false`: observers (persistence) do not hear of it until `announce(session)`. For a
   * session whose owner may still be rolled back, so a failed start leaves no file.
   */
  announce?: boolean
}


/** 48 random bits per process: ids from two processes never collide, even in the same millisecond. */
const processTag = randomBytes(6).toString('hex')
let sessionCounter = 0

/**
 * Time-ordered (sortable) and unique: base-36 milliseconds, then the counter's length (one
 * base-36 digit), this process's random tag and a counter. Cheaper than fresh randomness
 * per session, which matters when a parent fans out to a thousand children. The length
 * digit makes ids of one process and millisecond sort in the order they were made (a bare
 * counter put the 36th, `10`, before the 35th, `z`); it stands before the tag so that an
 * id's tail, which users type to name a session, keeps the tag's random characters
 * (padding the counter would have filled it with zeros).
 */
export function newSessionId(now = Date.now()): string {
  if (now !== lastIdTime.ms) lastIdTime = { ms: now, prefix: `${now.toString(36).padStart(9, '0')}-` }
  const counter = (++sessionCounter).toString(36)
  return `${lastIdTime.prefix}${counter.length.toString(36)}${processTag}${counter}`
}

/** The time part of the last id, reused within the same millisecond (see `lastIsoTime`). */
let lastIdTime = { ms: Number.NaN, prefix: '' }

/** The last timestamp formatted, reused within the same millisecond (children of a fan-out are created in a burst). */
let lastIsoTime = { ms: Number.NaN, text: '' }

function isoTime(ms: number): string {
  if (ms !== lastIsoTime.ms) lastIsoTime = { ms, text: new Date(ms).toISOString() }
  return lastIsoTime.text
}

/**
 * `ctx.sessions`: the live store of sessions, the observers that persist them, and the
 * one storage that reads them back.
 */
export class SessionStore extends Service {
  static Config: Schema<SessionStore.Config> = Schema.object({})

  private live = new Map<string, Session>()
  private observers: SessionObserver[] = []
  private storage: SessionStorage | undefined

  constructor(ctx: Context) {
    super(ctx, 'sessions')
  }

  /**
   * A new live session. `placement` gives its seed and whether it is announced apart from the
   * header fields, so a caller holding those (an agent's `meta`) need not copy them into a new
   * `init` (its fields win over `init.seed` and `init.announce`).
   */
  create(init: SessionInit = {}, placement?: Pick<SessionInit, 'seed' | 'announce'>): Session {
    const seed = placement === undefined ? init.seed : placement.seed
    const announce = placement === undefined ? init.announce : placement.announce
    const now = Date.now()
    const id = init.id ?? newSessionId(now)
    if (this.live.has(id)) throw new SessionError('DUPLICATE_SESSION', `session ${id} is already live`)
    const header: SessionHeader = { id, createdAt: isoTime(now), cwd: init.cwd ?? process.cwd() }
    if (seed && init.parentSession !== undefined && init.parentSession !== seed.session.id) {
      throw new SessionError('CORRUPT', `a session seeded from ${seed.session.id} must name it as parentSession (got ${init.parentSession})`)
    }
    const parentSession = init.parentSession ?? seed?.session.id
    if (parentSession !== undefined) header.parentSession = parentSession
    if (init.origin !== undefined) header.origin = init.origin
    if (init.delegationDepth !== undefined) header.delegationDepth = init.delegationDepth
    if (init.maxDepth !== undefined) header.maxDepth = init.maxDepth
    if (init.provider !== undefined) header.provider = init.provider
    if (init.label !== undefined) header.label = init.label
    if (init.toolCallId !== undefined) header.toolCallId = init.toolCallId
    if (init.descriptor !== undefined) header.descriptor = init.descriptor
    if (init.helper !== undefined) header.helper = { name: init.helper.name, hash: init.helper.hash }
    if (init.trace !== undefined) header.trace = init.trace
    if (init.attempt !== undefined) header.attempt = init.attempt
    if (init.permissions !== undefined) header.permissions = init.permissions
    if (init.budget !== undefined) header.budget = init.budget
    if (init.approvalDefault !== undefined) header.approvalDefault = init.approvalDefault
    if (init.workspace !== undefined) header.workspace = init.workspace
    if (init.sandbox !== undefined) header.sandbox = init.sandbox
    // The header was built here, key by key, from known fields: the session keeps it rather than copying it again.
    const session = new Session(header, seed, this.reportListenerError, true)
    this.live.set(id, session)
    if (announce !== false) this.announce(session)
    return session
  }

  /** Tell observers about a session created with `announce: false` (persistence starts now). */
  announce(session: Session): void {
    for (const observer of this.observers) observer.created?.(session)
  }

  get(id: string): Session | undefined {
    return this.live.get(id)
  }

  /** Live sessions, in creation order. */
  list(): Session[] {
    return [...this.live.values()]
  }

  /**
   * A live session by id, or one read back from storage and made live again (resume).
   * A forked session's seed is rebuilt from its parent's stored events.
   */
  async open(id: string): Promise<Session> {
    const existing = this.live.get(id)
    if (existing) return existing
    const storage = this.requireStorage()
    const finishClaim = await storage.claim?.(id)
    try {
      const stored = await storage.read(id)
      if (!stored) throw new SessionError('NOT_FOUND', `no stored session ${id} in ${storage.name}`)
      for (const warning of stored.warnings) this.ctx.logger('sessions').warn(warning)
      const seed = await this.rebuildSeed(stored.header)
      const session = new Session(stored.header, seed, this.reportListenerError)
      session.restore(stored.events)
      if (this.live.has(id)) return this.live.get(id)!
      this.live.set(id, session)
      for (const observer of this.observers) observer.created?.(session)
      return session
    } finally {
      finishClaim?.()
    }
  }

  /** Stop tracking a session: no more events; persistence flushes before this resolves. */
  release(session: Session): Promise<void> {
    if (session.released) return Promise.resolve()
    session.markReleased()
    if (this.live.get(session.id) === session) this.live.delete(session.id)
    // Without observers (nothing persists sessions) there is nothing to wait for.
    return this.observers.length === 0 ? Promise.resolve() : this.tellReleased(session)
  }

  /**
   * Each observer's `released`, one at a time; every failure is reported. Observers that
   * return nothing are told synchronously (a fan-out releases a session per child, most
   * with nothing to flush); from the first one that returns a promise on, the rest wait.
   */
  private tellReleased(session: Session): Promise<void> {
    const observers = this.observers
    let errors: unknown[] | undefined
    for (let index = 0; index < observers.length; index++) {
      try {
        const flushed = observers[index].released?.(session)
        if (flushed !== undefined) return this.tellReleasedAfter(session, observers, index, flushed, errors ?? [])
      } catch (error) {
        ;(errors ??= []).push(error)
      }
    }
    // Every agent's disposal passes here: a failure becomes a rejection in place, with no closure for it.
    if (errors === undefined) return Promise.resolve()
    try {
      throwReleaseErrors(session, errors)
    } catch (error) {
      return Promise.reject(error)
    }
    return Promise.resolve()
  }

  /** `tellReleased` from the observer at `index`, whose flush is `flushed`, on. */
  private async tellReleasedAfter(session: Session, observers: readonly SessionObserver[], index: number, flushed: Promise<void>, errors: unknown[]): Promise<void> {
    try {
      await flushed
    } catch (error) {
      errors.push(error)
    }
    for (const observer of observers.slice(index + 1)) {
      try {
        // An observer with nothing to flush returns nothing: no tick spent waiting for it.
        const pending = observer.released?.(session)
        if (pending !== undefined) await pending
      } catch (error) {
        errors.push(error)
      }
    }
    throwReleaseErrors(session, errors)
  }

  addObserver(observer: SessionObserver): () => void {
    return this.ctx.effect(() => {
      this.observers = [...this.observers, observer]
      return () => {
        this.observers = this.observers.filter((entry) => entry !== observer)
      }
    }, 'sessions.addObserver()')
  }

  registerStorage(storage: SessionStorage): () => void {
    if (this.storage) throw new SessionError('DUPLICATE_STORAGE', `session storage "${this.storage.name}" is already registered; only one storage may be loaded`)
    return this.ctx.effect(() => {
      this.storage = storage
      return () => {
        if (this.storage === storage) this.storage = undefined
      }
    }, `sessions.registerStorage(${JSON.stringify(storage.name)})`)
  }

  get storageName(): string | undefined {
    return this.storage?.name
  }

  /** Headers of every stored session (no particular order). */
  async listStored(): Promise<SessionHeader[]> {
    return this.requireStorage().list()
  }

  async readStored(id: string): Promise<StoredSession | undefined> {
    return this.requireStorage().read(id)
  }

  locate(id: string): string | undefined {
    return this.storage?.locate(id)
  }

  private requireStorage(): SessionStorage {
    if (!this.storage) throw new SessionError('NO_STORAGE', 'no session storage is loaded (load @dsh/session-jsonl or pass --session-dir)')
    return this.storage
  }

  private async rebuildSeed(header: SessionHeader): Promise<{ session: Session; length: number } | undefined> {
    const length = header.seedLength ?? 0
    if (length === 0) return undefined
    if (!header.parentSession) throw new SessionError('CORRUPT', `session ${header.id} has seedLength ${length} but no parentSession`)
    const parent = this.live.get(header.parentSession) ?? (await this.readDetached(header.parentSession, header))
    if (parent.length < length) throw new SessionError('CORRUPT', `session ${header.id} is seeded with ${length} events of ${parent.id}, which has only ${parent.length}`)
    return { session: parent, length }
  }

  /** A stored session rebuilt without making it live (a fork's parent, read for its prefix). */
  private async readDetached(id: string, fork: SessionHeader): Promise<Session> {
    const storage = this.requireStorage()
    const stored = await storage.read(id)
    // The fork itself exists: it is its stored state that is broken, so this is not NOT_FOUND.
    if (!stored) throw new SessionError('CORRUPT', `session ${fork.id} is a fork of session ${id}, whose stored file ${storage.locate(id)} is gone; the fork cannot be rebuilt without the first ${fork.seedLength} events of its parent`)
    const session = new Session(stored.header, await this.rebuildSeed(stored.header), this.reportListenerError)
    session.restore(stored.events)
    return session
  }

  private reportListenerError = (error: unknown): void => {
    this.ctx.logger('sessions').warn('a session listener threw: %s', error instanceof Error ? error.stack ?? error.message : errorMessage(error))
  }
}

export namespace SessionStore {
  export interface Config {}
}

function throwReleaseErrors(session: Session, errors: unknown[] | undefined): void {
  if (errors === undefined || errors.length === 0) return
  if (errors.length === 1) throw errors[0]
  throw new AggregateError(errors, `releasing session ${session.id} failed`)
}
