import { textOf, type MessageHistory } from '@dsh/llm'
import type { AssistantChunk, SessionEvent, SessionEventBody, SessionHeader, SessionUpdate } from './events.js'
import { EventLog } from './log.js'
import { SessionError } from './errors.js'
import { MessageProjection } from './projection.js'

export type SessionListener = (update: SessionUpdate) => void

/** Shared by every session without listeners (the lists are replaced, never changed in place). */
const NO_LISTENERS: readonly SessionListener[] = Object.freeze([])

/**
 * One conversation: a frozen header and an append-only event log. Appending is the only
 * way to change it; listeners hear every appended event and every live chunk.
 */
export class Session {
  readonly header: Readonly<SessionHeader>
  /** The header's id, held in a field: it is read on every step of every agent. */
  readonly id: string
  private readonly log: EventLog
  private readonly projection: MessageProjection
  // Copy-on-write lists: every session starts with the one shared empty list (most never get a listener).
  private listeners: readonly SessionListener[] = NO_LISTENERS
  /** Listeners of the durable events alone (`subscribe(listener, { chunks: false })`): they do not make the session `listened`. */
  private eventListeners: readonly SessionListener[] = NO_LISTENERS
  private _released = false
  private _lastTurnEnd = 0
  private _ownPrompt: string | undefined

  constructor(
    header: SessionHeader,
    seed?: { session: Session; length: number },
    private readonly reportListenerError: (error: unknown) => void = (error) => console.error(error),
    /** The header is the caller's own fresh object of known fields (the store's `create`): kept, not copied. */
    headerIsOwn = false,
  ) {
    if (headerIsOwn) {
      if (seed) header.seedLength = seed.length
      this.header = Object.freeze(header)
      this.id = header.id
    } else {
      this.header = copiedHeader(header, seed)
      this.id = this.header.id
    }
    this.log = new EventLog(seed && { log: seed.session.log, length: seed.length })
    this.projection = new MessageProjection(this.log, seed && { projection: seed.session.projection, length: seed.length })
    this._lastTurnEnd = seed ? seed.length : 0
  }

  get length(): number {
    return this.log.length
  }

  get seedLength(): number {
    return this.log.seedLength
  }

  get released(): boolean {
    return this._released
  }

  /** Length of the completed-turn prefix: everything through the last `turn/end`. */
  get completedLength(): number {
    return this._lastTurnEnd
  }

  /** Text of the first user message this session itself received (after its seed). */
  get ownPrompt(): string | undefined {
    return this._ownPrompt
  }

  at(seq: number): SessionEvent | undefined {
    return this.log.at(seq)
  }

  events(from = 0): SessionEvent[] {
    return [...this.log.iterate(from)]
  }

  /** The events appended by this session (not its seed). */
  ownEvents(): readonly SessionEvent[] {
    return this.log.ownEvents()
  }

  /** The model-visible messages, as a view that shares any forked prefix. */
  messages(): MessageHistory {
    return this.projection.view()
  }

  /**
   * Append one event. The body object becomes the event (its `seq` and `ts` are set on
   * it): callers pass a fresh literal, and a fan-out of a thousand children appends enough
   * events that a copy per event shows up in garbage-collection time.
   */
  append(body: SessionEventBody): SessionEvent {
    if (this._released) throw new SessionError('RELEASED', `session ${this.id} is released; it cannot take new events`)
    const event = body as SessionEvent
    event.seq = this.log.length
    event.ts = Date.now()
    this.push(event)
    // Event listeners first: an observer of the record (a tracer) sees each event before anything another listener does in answer to it.
    // Most sessions (every child of a fan-out) have no listener: no call, no iterator then.
    if (this.eventListeners.length > 0) this.notifyAll(this.eventListeners, event)
    if (this.listeners.length > 0) this.notifyAll(this.listeners, event)
    return event
  }

  /** Restore events read back from storage (seqs must continue the log). Listeners are not told. */
  restore(events: readonly SessionEvent[]): void {
    for (const event of events) {
      if (event.seq !== this.log.length) throw new SessionError('CORRUPT', `session ${this.id}: restored event has seq ${event.seq}, expected ${this.log.length}`)
      this.push(event)
    }
  }

  private push(event: SessionEvent): void {
    this.log.push(event)
    if (event.type === 'turn/end') this._lastTurnEnd = this.log.length
    else if (event.type === 'user/message' && this._ownPrompt === undefined) this._ownPrompt = textOf(event.message.content)
  }

  /** Whether anyone listens: a producer of live fragments need not build them otherwise. */
  get listened(): boolean {
    return this.listeners.length > 0
  }

  /** Publish a live streaming fragment; never stored. */
  publish(chunk: AssistantChunk): void {
    if (!this._released) this.notify(chunk)
  }

  /**
   * Hear every appended event and, unless `chunks: false`, every live chunk. A listener of
   * events alone (a tracer, a recorder) does not make the session `listened`, so nobody
   * builds chunks for it.
   */
  subscribe(listener: SessionListener, options: { chunks?: boolean } = {}): () => void {
    if (options.chunks === false) {
      this.eventListeners = [...this.eventListeners, listener]
      return () => {
        this.eventListeners = this.eventListeners.filter((entry) => entry !== listener)
      }
    }
    this.listeners = [...this.listeners, listener]
    return () => {
      this.listeners = this.listeners.filter((entry) => entry !== listener)
    }
  }

  /** Called by the store on release: no more events, no more listeners. */
  markReleased(): void {
    this._released = true
    this.listeners = NO_LISTENERS
    this.eventListeners = NO_LISTENERS
  }

  private notify(update: SessionUpdate): void {
    this.notifyAll(this.listeners, update)
  }

  private notifyAll(listeners: readonly SessionListener[], update: SessionUpdate): void {
    // copy-on-write list: a listener that unsubscribes while we iterate is safe. Indexed,
    // not for-of: until the code is optimised, for-of makes an iterator per event.
    for (let index = 0; index < listeners.length; index++) {
      const listener = listeners[index]!
      try {
        // An async listener returns a promise: its rejection is contained like a throw,
        // never left to take the host down as an unhandled rejection.
        const returned: unknown = listener(update)
        if (returned instanceof Promise) returned.catch(this.reportListenerError)
      } catch (error) {
        // A listener is an observer: its failure must not stop the log or its peers.
        this.reportListenerError(error)
      }
    }
  }
}

/** A header given by someone else (read back from a file, a caller's object): copied, frozen, with the seed's length. */
function copiedHeader(header: SessionHeader, seed: { length: number } | undefined): Readonly<SessionHeader> {
  // Copied key by key, not by a spread: a spread clone that is then frozen gets a hidden
  // class of its own once V8's clone cache is warm (about 300 bytes and 0.3 µs more per
  // session, which a fan-out pays per child). Not by `Object.assign` either: a header read
  // back from a file may hold an own `__proto__` key, which assignment would turn into the
  // header's prototype (unchecked fields read through it); defining own keys keeps it data.
  const own = {} as SessionHeader
  for (const key of Object.keys(header)) {
    const value = (header as unknown as Record<string, unknown>)[key]
    if (key === '__proto__') Object.defineProperty(own, key, { value, enumerable: true, writable: true, configurable: true })
    else (own as unknown as Record<string, unknown>)[key] = value
  }
  if (seed) own.seedLength = seed.length
  return Object.freeze(own)
}
