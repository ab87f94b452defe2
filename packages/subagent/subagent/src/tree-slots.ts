/**
 * The slots of one delegation tree, for the tree gate (`tree-limits.ts`): a cap on the
 * children that run at once (in all, and per provider) and one bounded FIFO queue for the
 * rest. Loaded with the gate, only when limits are in use.
 *
 * A slot is held from the provider's start until the run's result settles. A child that
 * holds a slot lends it to one waiting child of its own (`lend`): a parent blocked on a
 * foreground child would otherwise hold a slot its child needs, and a tree full of such
 * parents would never move. So nested delegation cannot deadlock; the price is that a
 * parent that lent its slot and keeps working (its child runs in the background) runs
 * beside it. A lent slot goes back to its lender, not to the queue.
 */
import { SubagentError } from './errors.js'

/** The caps of every tree of one gate (its config). */
export interface SlotCaps {
  /** Most children of one tree running at once. */
  readonly maxConcurrent: number | undefined
  /** Most children of one tree waiting for a slot. */
  readonly maxQueued: number
  /** Most children of one tree running at once per named provider. */
  readonly perProvider: ReadonlyMap<string, number>
}

/** A running child that may lend its slot to one child of its own. */
export interface Lender {
  /** Whether its slot is on loan now. */
  lent: boolean
}

/** A running child's hold on its tree. */
export interface Slot {
  /** The child whose slot this is on loan from (the parent), or undefined for a slot of the tree's own. */
  readonly lender: Lender | undefined
  readonly provider: string
}

interface Waiter {
  /** The provider it would start on (for the per-provider caps). */
  provider: string
  grant: (slot: Slot) => void
  fail: (error: Error) => void
  /** Set once granted, failed or cancelled: a settled waiter left in the queue is skipped. */
  done: boolean
}

/** One tree's slots: those held, and the children waiting for one, first come first served. */
export class TreeSlots {
  running = 0
  /** Running children per provider, kept only for providers with a cap. */
  private readonly byProvider = new Map<string, number>()
  /** Waiters not yet granted, failed or cancelled (those left in `queue` are skipped). */
  waiting = 0
  /** FIFO; `head` is the next to be served, so a long queue is not shifted on every grant. */
  private queue: Waiter[] = []
  private head = 0

  constructor(private readonly caps: SlotCaps) {}

  /** A slot of the tree's own for a child on `provider`, when the caps leave one free. */
  take(provider: string): Slot | undefined {
    const { maxConcurrent, perProvider } = this.caps
    if (maxConcurrent !== undefined && this.running >= maxConcurrent) return undefined
    const cap = perProvider.get(provider)
    if (cap !== undefined) {
      const running = this.byProvider.get(provider) ?? 0
      if (running >= cap) return undefined
      this.byProvider.set(provider, running + 1)
    }
    this.running++
    return { lender: undefined, provider }
  }

  /**
   * The slot of `lender`, a running child of the tree, on loan to one of its own children
   * when it has not lent it already: a parent waiting on its child must not starve it.
   */
  lend(lender: Lender | undefined, provider: string): Slot | undefined {
    if (lender === undefined || lender.lent) return undefined
    lender.lent = true
    return { lender, provider }
  }

  /** Give `slot` back: to its lender, or to the tree, which then serves those waiting in order. */
  release(slot: Slot): void {
    if (slot.lender !== undefined) {
      slot.lender.lent = false
      return
    }
    this.running--
    if (this.caps.perProvider.has(slot.provider)) this.byProvider.set(slot.provider, this.byProvider.get(slot.provider)! - 1)
    this.serve()
  }

  /** Whether the queue is at its bound: one more waiter is refused. */
  get full(): boolean {
    return this.waiting >= this.caps.maxQueued
  }

  /** Why one more child of the tree rooted at `rootId` may not wait on `provider` (the queue is full). */
  queueFull(rootId: string, provider: string): SubagentError {
    const { maxConcurrent, maxQueued, perProvider } = this.caps
    const cap = perProvider.get(provider)
    const caps = [maxConcurrent !== undefined && `maxConcurrent ${maxConcurrent}`, cap !== undefined && `${cap} at once on ${provider}`].filter(Boolean).join(', ')
    return new SubagentError(
      'QUEUE_FULL',
      `the delegation tree of ${rootId} has ${this.running} children running (${caps}) and ${this.waiting} waiting, the most allowed (maxQueued ${maxQueued}); wait for some to finish before delegating more`,
    )
  }

  /**
   * Wait at the back of the queue for a slot on `provider`. `announce(true)` is called
   * (synchronously) once queued, and `announce(false)` when it leaves the queue, before the
   * promise settles: granted, refused (`refuseAll`) or cancelled (`signal` aborts: `ABORTED`).
   */
  wait(provider: string, signal: AbortSignal, announce: (waiting: boolean) => void): Promise<Slot> {
    return new Promise<Slot>((resolve, reject) => {
      const onAbort = () => {
        if (waiter.done) return
        waiter.done = true
        this.waiting--
        announce(false)
        reject(new SubagentError('ABORTED', 'the delegation was cancelled while it waited for a slot; it was never started', { cause: signal.reason }))
      }
      const waiter: Waiter = {
        provider,
        done: false,
        grant: (slot) => {
          waiter.done = true
          this.waiting--
          signal.removeEventListener('abort', onAbort)
          announce(false)
          resolve(slot)
        },
        fail: (error) => {
          waiter.done = true
          this.waiting--
          signal.removeEventListener('abort', onAbort)
          announce(false)
          reject(error)
        },
      }
      this.queue.push(waiter)
      this.waiting++
      signal.addEventListener('abort', onAbort, { once: true })
      announce(true)
    })
  }

  /** Refuse every child waiting, in order, with `error` (the tree's budget is spent). */
  refuseAll(error: Error): void {
    while (this.head < this.queue.length) {
      const waiter = this.queue[this.head]!
      this.queue[this.head++] = undefined as unknown as Waiter
      if (!waiter.done) waiter.fail(error)
    }
    this.queue = []
    this.head = 0
  }

  /**
   * Grant free slots to waiters, first come first served: the first one whose provider has
   * room (without provider caps, simply the first). A waiter whose provider is at its cap
   * does not hold up those behind it on other providers.
   */
  private serve(): void {
    const { maxConcurrent, perProvider } = this.caps
    while (this.waiting > 0) {
      // Skip what was cancelled at the head, and compact now and then.
      while (this.head < this.queue.length && this.queue[this.head]!.done) this.queue[this.head++] = undefined as unknown as Waiter
      if (this.head > 1024 && this.head * 2 > this.queue.length) {
        this.queue = this.queue.slice(this.head)
        this.head = 0
      }
      let index = this.head
      let slot: Slot | undefined
      for (; index < this.queue.length; index++) {
        const waiter = this.queue[index]!
        if (waiter.done) continue
        slot = this.take(waiter.provider)
        if (slot !== undefined) break
        // Without provider caps, or at the tree's cap, nobody further back can start either.
        if (perProvider.size === 0 || (maxConcurrent !== undefined && this.running >= maxConcurrent)) return
      }
      if (slot === undefined) return
      const waiter = this.queue[index]!
      if (index === this.head) this.queue[this.head++] = undefined as unknown as Waiter
      else this.queue.splice(index, 1)
      waiter.grant(slot)
    }
  }
}
