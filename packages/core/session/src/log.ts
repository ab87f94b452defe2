import type { SessionEvent } from './events.js'

/** Events `[events[0].seq, end)` of some log's own array: `events[seq - base]` is event `seq`. */
interface Segment {
  readonly events: readonly SessionEvent[]
  readonly base: number
  readonly end: number
}

/**
 * An append-only log whose head may be a prefix of another log. A fork child's log
 * refers to its parent's event arrays instead of copying them: those arrays only ever
 * grow, so the first `seedLength` entries are immutable and safe to share, and seeding
 * costs the same for a parent of 10 events as for one of 100,000.
 */
export class EventLog {
  private readonly prefix: readonly Segment[]
  private readonly prefixLength: number
  private readonly own: SessionEvent[] = []

  constructor(seed?: { log: EventLog; length: number }) {
    if (!seed) {
      this.prefix = []
      this.prefixLength = 0
      return
    }
    if (!Number.isInteger(seed.length) || seed.length < 0 || seed.length > seed.log.length) {
      throw new RangeError(`seed length ${seed.length} is outside the parent log (0..${seed.log.length})`)
    }
    this.prefix = seed.log.segmentsUpTo(seed.length)
    this.prefixLength = seed.length
  }

  get length(): number {
    return this.prefixLength + this.own.length
  }

  /** Number of events that came from the seed. */
  get seedLength(): number {
    return this.prefixLength
  }

  at(seq: number): SessionEvent | undefined {
    if (seq < 0 || seq >= this.length) return undefined
    if (seq >= this.prefixLength) return this.own[seq - this.prefixLength]
    for (const segment of this.prefix) {
      if (seq < segment.end) return segment.events[seq - segment.base]
    }
    return undefined
  }

  push(event: SessionEvent): void {
    this.own.push(event)
  }

  /** The events this log appended itself (after the seed). */
  ownEvents(): readonly SessionEvent[] {
    return this.own
  }

  *iterate(from = 0): IterableIterator<SessionEvent> {
    for (let seq = from; seq < this.length; seq++) yield this.at(seq)!
  }

  toArray(): SessionEvent[] {
    return [...this.iterate()]
  }

  private segmentsUpTo(length: number): Segment[] {
    const out: Segment[] = []
    let covered = 0
    for (const segment of this.prefix) {
      if (covered >= length) return out
      const end = Math.min(segment.end, length)
      out.push({ events: segment.events, base: segment.base, end })
      covered = end
    }
    if (covered < length) out.push({ events: this.own, base: this.prefixLength, end: length })
    return out
  }
}
