/**
 * Aborts when a started stream goes quiet for `ms`. An SDK's own timeout covers only the
 * wait for response headers; without this a server that stops sending mid-stream would
 * hang the turn for ever. Adapters `restart()` it at each piece of the stream.
 */
export class QuietTimer {
  expired = false
  private controller = new AbortController()
  private timer: NodeJS.Timeout | undefined
  readonly signal: AbortSignal = this.controller.signal

  constructor(private ms: number) {}

  restart(): void {
    clearTimeout(this.timer)
    this.timer = setTimeout(() => {
      this.expired = true
      this.controller.abort()
    }, this.ms)
  }

  stop(): void {
    clearTimeout(this.timer)
  }
}
