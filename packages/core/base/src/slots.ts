/**
 * A bound on how much work runs at once, for a host serving requests it did not start
 * (`dsh a2a serve`'s tasks, `dsh mcp serve`'s calls): at most `limit` run, the rest wait in
 * arrival order, and a waiter whose signal aborts leaves the queue. With `maxQueued`, a
 * request arriving when that many already wait is for the caller to refuse (`full`), so a
 * client flooding a server gets errors rather than an unbounded queue.
 *
 * A delegation tree's own cap is `@dsh/subagent`'s tree slots (per tree, per provider,
 * with lending); this is the plain one a served host puts in front of it.
 */
export class FifoSlots {
  private running = 0
  private readonly waiting: Array<{ grant(): void }> = []

  constructor(
    readonly limit: number,
    readonly maxQueued = Number.POSITIVE_INFINITY,
  ) {}

  get queued(): number {
    return this.waiting.length
  }

  get active(): number {
    return this.running
  }

  /** Whether a request arriving now should be refused: every slot taken and the queue at `maxQueued`. */
  get full(): boolean {
    return this.running >= this.limit && this.waiting.length >= this.maxQueued
  }

  /** Resolves once the work may run; rejects with the signal's reason if it aborts first. */
  acquire(signal: AbortSignal): Promise<void> {
    if (signal.aborted) return Promise.reject(signal.reason)
    if (this.running < this.limit) {
      this.running++
      return Promise.resolve()
    }
    return new Promise<void>((resolve, reject) => {
      const entry = {
        grant: () => {
          signal.removeEventListener('abort', onAbort)
          this.running++
          resolve()
        },
      }
      const onAbort = () => {
        const index = this.waiting.indexOf(entry)
        if (index >= 0) this.waiting.splice(index, 1)
        reject(signal.reason)
      }
      signal.addEventListener('abort', onAbort, { once: true })
      this.waiting.push(entry)
    })
  }

  /** One running piece of work ended: the longest waiter, if any, runs. */
  release(): void {
    this.running = Math.max(0, this.running - 1)
    this.waiting.shift()?.grant()
  }
}
