/**
 * Session ids are new in every run, yet a request can carry one (a tool result naming a
 * child, a refusal naming the parent) and a response can echo one (a model addressing a
 * child by id). Recordings therefore hold lineage placeholders, `<session:root.call_1>`,
 * in place of the ids of live sessions: requests are masked before they are stored or
 * compared, and recorded responses are unmasked to this run's ids before they stream.
 */
import type { Lineage } from './lineage.js'

const PLACEHOLDER = /<session:([A-Za-z0-9_.-]+)>/g

export class SessionIdMask {
  /** Every session id seen live: a session gone by now may still be named in a later request. */
  private seen = new Set<string>()

  constructor(
    private readonly lineage: Lineage,
    private readonly liveSessionIds: () => readonly string[],
  ) {}

  /** `value` (JSON data) with every live session id replaced by its lineage placeholder. */
  mask<T>(value: T): T {
    const text = JSON.stringify(value)
    let masked = text
    for (const id of this.liveSessionIds()) this.seen.add(id)
    for (const id of this.seen) {
      if (masked.includes(id)) masked = masked.replaceAll(id, `<session:${this.lineage.keyOf(id)}>`)
    }
    return masked === text ? value : (JSON.parse(masked) as T)
  }

  /** `value` with every placeholder of a live session replaced by that session's id in this run. */
  unmask<T>(value: T): T {
    const text = JSON.stringify(value)
    if (!text.includes('<session:')) return value
    const idOfKey = new Map(this.liveSessionIds().map((id) => [this.lineage.keyOf(id), id] as const))
    return JSON.parse(text.replace(PLACEHOLDER, (placeholder, key: string) => idOfKey.get(key) ?? placeholder)) as T
  }
}
