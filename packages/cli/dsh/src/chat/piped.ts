/**
 * The prompts of `dsh chat` when standard input or output is not a terminal (a pipe, a
 * file, CI): read from standard input as the prompt line would take them typed, one prompt
 * a line. A line ending in `\` goes on to the next (the `\` dropped, a line break kept), as
 * at the terminal; blank lines are skipped; the end of input ends the session. A prompt is
 * bounded as a typed one is (`MAX_PROMPT_BYTES`): a larger one is refused in one line, its
 * text dropped as it arrives (never held), and the next line starts the next prompt. Bytes
 * that are not UTF-8 are read as U+FFFD; control characters and escape sequences are
 * dropped, as from a paste.
 *
 * Input is read only as fast as prompts are taken: while a read prompt waits for its turn
 * the stream is paused, so the rest of a long script stays in the pipe.
 */
import { StringDecoder } from 'node:string_decoder'
import { MAX_PROMPT_BYTES, pastedText, sizeOf, type PromptRead } from './line-editor.js'

export interface PipedPromptsOptions {
  input: NodeJS.ReadableStream
  /** Called with one line for a prompt that was refused (too large). */
  refused(line: string): void
  maxPromptBytes?: number
}

export class PipedPrompts {
  private readonly decoder = new StringDecoder('utf8')
  /** The text after the last line break, not yet a whole line. */
  private partial = ''
  /** The lines of the prompt being read (continued by a trailing `\`). */
  private lines: string[] = []
  /** Its size so far; past the bound the prompt is being dropped. */
  private bytes = 0
  /** Bytes of the line under way already dropped (it grew past the bound before its end came). */
  private dropped = 0
  private readonly ready: PromptRead[] = []
  private waiting: ((read: PromptRead) => void) | undefined
  private ended = false
  private readonly onData = (chunk: Buffer | string) => this.take(typeof chunk === 'string' ? chunk : this.decoder.write(chunk))
  private readonly onEnd = () => this.finish()

  constructor(private readonly options: PipedPromptsOptions) {
    options.input.on('data', this.onData)
    options.input.on('end', this.onEnd)
    // A closed or unreadable input is the end of the prompts, never an uncaught error.
    options.input.on('error', this.onEnd)
  }

  private get maxBytes(): number {
    return this.options.maxPromptBytes ?? MAX_PROMPT_BYTES
  }

  /** The next prompt, or `end` once the input is over (or `end()` was called). */
  read(): Promise<PromptRead> {
    const next = this.ready.shift()
    if (next) return Promise.resolve(next)
    if (this.ended) return Promise.resolve({ kind: 'end' })
    this.options.input.resume()
    return new Promise((resolve) => (this.waiting = resolve))
  }

  /** A piped turn has no keys to take: a signal cancels it. */
  duringTurn(): () => void {
    return () => {}
  }

  /** Nothing is drawn for a prompt to stand in front of. */
  standAside(): () => void {
    return () => {}
  }

  /** The session is leaving: what is still in the input is not read. */
  end(): void {
    this.ended = true
    this.ready.length = 0
    this.deliver({ kind: 'end' })
  }

  close(): void {
    this.end()
    this.options.input.off('data', this.onData)
    this.options.input.off('end', this.onEnd)
    this.options.input.off('error', this.onEnd)
    this.options.input.pause()
  }

  private take(text: string): void {
    if (this.ended) return
    const pieces = (this.partial + text).split('\n')
    this.partial = pieces.pop()!
    for (const piece of pieces) this.line(piece)
    // A line longer than any prompt may be is counted, not kept, while it arrives.
    const partialBytes = Buffer.byteLength(this.partial)
    if (this.bytes + this.dropped + partialBytes > this.maxBytes) {
      this.dropped += partialBytes
      this.partial = ''
    }
    if (this.ready.length > 0) this.options.input.pause()
  }

  private line(raw: string): void {
    // A CRLF file's lines end in \r: not part of the prompt.
    const line = raw.endsWith('\r') ? raw.slice(0, -1) : raw
    const continued = line.endsWith('\\')
    const text = pastedText(continued ? line.slice(0, -1) : line)
    this.bytes += this.dropped + Buffer.byteLength(text) + (this.lines.length > 0 ? 1 : 0)
    this.dropped = 0
    if (this.bytes <= this.maxBytes) this.lines.push(text)
    if (continued) return
    const prompt = this.lines.join('\n')
    const bytes = this.bytes
    this.lines = []
    this.bytes = 0
    if (bytes > this.maxBytes) {
      this.options.refused(`dsh: a prompt of ${sizeOf(bytes)} was refused: one holds at most ${sizeOf(this.maxBytes)}; put the text in a file and name the file in your prompt`)
      return
    }
    if (prompt.trim()) this.deliver({ kind: 'prompt', text: prompt })
  }

  /** The input is over: a prompt still being continued is sent as it is. */
  private finish(): void {
    if (this.ended) return
    const rest = this.partial + this.decoder.end()
    this.partial = ''
    // A last line ending in `\` has nothing after it to go on to: it ends the prompt.
    if (rest || this.lines.length > 0 || this.dropped > 0) this.line(rest.replace(/\\\r?$/, ''))
    this.ended = true
    this.deliver({ kind: 'end' })
  }

  private deliver(read: PromptRead): void {
    const waiting = this.waiting
    if (waiting) {
      this.waiting = undefined
      return waiting(read)
    }
    if (read.kind !== 'end') this.ready.push(read)
  }
}
