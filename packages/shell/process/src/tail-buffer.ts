/** The last `limit` characters written to it: a bounded stderr tail for diagnostics. */
export class TailBuffer {
  private text = ''
  private dropped = false

  constructor(private readonly limit: number) {}

  push(chunk: string): void {
    const joined = this.text + chunk
    if (joined.length > this.limit) {
      this.dropped = true
      this.text = joined.slice(joined.length - this.limit)
    } else this.text = joined
  }

  /** The tail, trimmed, marked with `…` when earlier output was dropped. */
  toString(): string {
    const trimmed = this.text.trim()
    return this.dropped && trimmed ? `…${trimmed}` : trimmed
  }
}
