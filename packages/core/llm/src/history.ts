import type { Message } from './messages.js'

/**
 * A read-only, ordered view of the messages a request carries. It is a view rather than
 * an array so a forked child can share its parent's (immutable) prefix without copying
 * it: adapters that need a real array call `toArray()` once per request.
 */
export interface MessageHistory extends Iterable<Message> {
  readonly length: number
  at(index: number): Message | undefined
  toArray(): Message[]
}

/** A history over a plain array (tests, adapters composing their own requests). */
export function historyOf(messages: readonly Message[]): MessageHistory {
  return {
    get length() {
      return messages.length
    },
    at: (index) => messages.at(index),
    toArray: () => messages.slice(),
    [Symbol.iterator]: () => messages[Symbol.iterator](),
  }
}
