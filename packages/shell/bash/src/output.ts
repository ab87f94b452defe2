import type { OutputSlice } from './types.js'

/**
 * Captured output with a fixed memory bound: the first `headChars` characters and the
 * last `tailChars` are kept, the middle is dropped and counted. The head shows what a
 * command set out to do, the tail how it ended (errors, summaries), which is what a
 * reader needs from a flood. Readers address the output by absolute offsets, so an
 * incremental reader that keeps up sees everything and one that falls behind is told
 * how much scrolled away.
 */
export class BoundedOutput {
  private head = ''
  /** Everything after the head that is still retained; trimmed lazily to keep appends cheap. */
  private tail = ''
  private total = 0

  constructor(
    private readonly headChars: number,
    private readonly tailChars: number,
  ) {}

  /** Split a total bound between head (a third) and tail (the rest). */
  static withLimit(maxChars: number): BoundedOutput {
    const head = Math.floor(maxChars / 3)
    return new BoundedOutput(head, maxChars - head)
  }

  /** Characters appended so far, dropped ones included. */
  get length(): number {
    return this.total
  }

  /** Characters dropped from the middle so far. */
  get dropped(): number {
    return this.total - this.head.length - this.tailView().length
  }

  append(text: string): void {
    if (!text) return
    this.total += text.length
    let rest = text
    if (this.head.length < this.headChars) {
      const room = this.headChars - this.head.length
      this.head += rest.slice(0, room)
      rest = rest.slice(room)
    }
    if (!rest) return
    this.tail += rest
    if (this.tail.length > 2 * this.tailChars) this.tail = this.tail.slice(-this.tailChars)
  }

  /** Output from absolute offset `cursor` to the end, with a marker where characters were dropped. */
  read(cursor: number): OutputSlice {
    const from = Math.min(Math.max(0, Math.floor(cursor)), this.total)
    const view = this.tailView()
    const tailStart = this.total - view.length
    let text = from < this.head.length ? this.head.slice(from) : ''
    const owedFrom = Math.max(from, this.head.length)
    const skipped = Math.max(0, tailStart - owedFrom)
    if (skipped > 0) text += droppedMarker(skipped)
    text += view.slice(Math.max(0, owedFrom - tailStart))
    return { text, next: this.total, skipped }
  }

  /** Everything retained. */
  text(): string {
    return this.read(0).text
  }

  private tailView(): string {
    return this.tail.length > this.tailChars ? this.tail.slice(-this.tailChars) : this.tail
  }
}

export function droppedMarker(count: number): string {
  return `\n[... ${count} characters of output dropped ...]\n`
}
