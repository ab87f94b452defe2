/**
 * The line in front of a front-end that shows one request at a time (a terminal prompt):
 * one FIFO per asking agent, taken in turn, so an agent that asks a thousand times holds
 * up each other agent by one prompt at most.
 */
export interface QueuedAsk {
  /** Which agent asks (its requests keep their order among themselves). */
  readonly requester: string
  /** Still waiting for an answer (a request withdrawn while queued is skipped). */
  readonly open: boolean
  /** Put it to the front-end; resolves when that exchange is over. */
  run(): Promise<void>
}

export class FairQueue {
  private readonly lines = new Map<string, QueuedAsk[]>()
  /** Requesters in the order they are served next. */
  private turn: string[] = []
  /**
   * The requester served last, while it still has requests: it goes to the back of the
   * turn only when the next one is picked, so an agent that asked while it was being
   * served is ahead of it.
   */
  private served: string | undefined
  private busy = false

  add(ask: QueuedAsk): void {
    const line = this.lines.get(ask.requester)
    if (line) line.push(ask)
    else {
      this.lines.set(ask.requester, [ask])
      // The requester being served takes its place in the turn when the next one is picked.
      if (ask.requester !== this.served) this.turn.push(ask.requester)
    }
    if (!this.busy) void this.pump()
  }

  /** Take `ask` out of its line, if it is still waiting there (a request withdrawn before its turn). */
  remove(ask: QueuedAsk): void {
    const line = this.lines.get(ask.requester)
    if (line === undefined) return
    const index = line.indexOf(ask)
    if (index < 0) return
    line.splice(index, 1)
    if (line.length === 0) {
      this.lines.delete(ask.requester)
      this.turn = this.turn.filter((requester) => requester !== ask.requester)
    }
  }

  private next(): QueuedAsk | undefined {
    for (;;) {
      if (this.served !== undefined) {
        if (this.lines.has(this.served)) this.turn.push(this.served)
        this.served = undefined
      }
      const requester = this.turn.shift()
      if (requester === undefined) return undefined
      const line = this.lines.get(requester)!
      const ask = line.shift()
      if (line.length === 0) this.lines.delete(requester)
      this.served = requester
      if (ask?.open) return ask
    }
  }

  private async pump(): Promise<void> {
    this.busy = true
    try {
      for (let ask = this.next(); ask !== undefined; ask = this.next()) await ask.run()
    } finally {
      this.busy = false
    }
  }
}
