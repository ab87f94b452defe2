/**
 * The bound on calls: at most `limit` run at once, at most `maxQueued` wait in arrival
 * order, and beyond that a call is refused at once, so a client flooding the server gets
 * errors rather than an unbounded queue. A waiting call whose signal aborts leaves the queue.
 */
export class CallSlots {
  private running = 0
  private readonly waiting: Array<{ grant(): void }> = []

  constructor(
    readonly limit: number,
    readonly maxQueued: number,
  ) {}

  /** Whether a call arriving now would be refused. */
  get full(): boolean {
    return this.running >= this.limit && this.waiting.length >= this.maxQueued
  }

  /** Resolves once the call may run; rejects with the signal's reason if it aborts first. Check `full` before. */
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

  release(): void {
    this.running = Math.max(0, this.running - 1)
    this.waiting.shift()?.grant()
  }
}
