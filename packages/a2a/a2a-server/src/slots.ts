/**
 * A bound on how many tasks run at once. A task past the bound waits its turn in arrival
 * order; aborting its signal takes it out of the queue.
 */
export class TaskSlots {
  private running = 0
  private readonly waiting: Array<{ grant(): void }> = []

  constructor(readonly limit: number) {}

  get queued(): number {
    return this.waiting.length
  }

  get active(): number {
    return this.running
  }

  /** Resolves once the task may run; rejects with the signal's reason if it is aborted first. */
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
