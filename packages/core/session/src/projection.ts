import { assertNever } from '@dsh/base'
import type { Message, MessageHistory } from '@dsh/llm'
import type { EventLog } from './log.js'
import type { SessionEvent } from './events.js'

/** The message an event contributes to the model's view, if any. */
export function messageOf(event: SessionEvent): Message | undefined {
  switch (event.type) {
    case 'user/message':
      return event.message
    case 'assistant/message':
      return event.message.content.length > 0 ? event.message : undefined
    case 'tool/result':
      return { role: 'tool', content: [event.result] }
    case 'turn/start':
    case 'step/start':
    case 'tool/call':
    case 'step/end':
    case 'turn/end':
    case 'input/queued':
    case 'input/taken':
    case 'approval':
    case 'hook/run':
      return undefined
    default:
      return assertNever(event, 'session event')
  }
}

/**
 * The model-visible messages of one log, kept up to date incrementally. A fork child's
 * projection starts with a reference to its parent's projection (the messages of the
 * seeded events) instead of a copy, like the log itself.
 */
export class MessageProjection {
  private readonly own: Message[] = []
  /** `ownSeqs[i]` is the seq of the event that produced `own[i]`, for seed cut-offs. */
  private readonly ownSeqs: number[] = []
  private readonly prefix?: { projection: MessageProjection; count: number }
  private processed: number

  constructor(private readonly log: EventLog, seed?: { projection: MessageProjection; length: number }) {
    this.processed = log.seedLength
    if (seed) this.prefix = { projection: seed.projection, count: seed.projection.countBefore(seed.length) }
  }

  /** Messages produced by events with seq < `seq`. */
  countBefore(seq: number): number {
    if (seq <= this.log.seedLength) return this.prefix ? this.prefix.projection.countBefore(seq) : 0
    this.catchUp()
    // binary search over own message seqs: the first own message at or after `seq`
    let lo = 0
    let hi = this.ownSeqs.length
    while (lo < hi) {
      const mid = (lo + hi) >>> 1
      if (this.ownSeqs[mid] < seq) lo = mid + 1
      else hi = mid
    }
    return (this.prefix?.count ?? 0) + lo
  }

  get length(): number {
    this.catchUp()
    return (this.prefix?.count ?? 0) + this.own.length
  }

  at(index: number): Message | undefined {
    const prefixCount = this.prefix?.count ?? 0
    if (index < prefixCount) return this.prefix!.projection.at(index)
    this.catchUp()
    return this.own[index - prefixCount]
  }

  /** A stable view of the first `length` messages (default: all of them now). */
  view(length = this.length): MessageHistory {
    return new ProjectionView(this, length)
  }

  private catchUp(): void {
    while (this.processed < this.log.length) {
      const event = this.log.at(this.processed)!
      const message = messageOf(event)
      if (message) {
        this.own.push(message)
        this.ownSeqs.push(event.seq)
      }
      this.processed++
    }
  }
}

/** The first `length` messages of a projection; later appends do not change it. */
class ProjectionView implements MessageHistory {
  constructor(private readonly projection: MessageProjection, readonly length: number) {}

  at(index: number): Message | undefined {
    if (index < 0) index += this.length
    return index >= 0 && index < this.length ? this.projection.at(index) : undefined
  }

  toArray(): Message[] {
    return [...this]
  }

  *[Symbol.iterator](): Iterator<Message> {
    for (let i = 0; i < this.length; i++) yield this.projection.at(i)!
  }
}
