/**
 * `dsh run` on a terminal: the one writer of the screen while a run is live. Above, what
 * stays: the root's text as it streams, its tool calls, notices and log lines, each written
 * once. Below, what is redrawn in place: the row of text still being written and the live
 * tree. A frame moves the cursor back over the rows it drew last time, clears below, writes
 * whatever became permanent since, then the live rows again; so nothing written above is
 * ever overwritten, and the rows moved back over are always the frame's own.
 */
import { printable } from '@dsh/base'
import { columnWidth } from '@dsh/subagent'
import { toneOfLine, type Palette, type Tone } from './colors.js'
import { treeLines } from './render.js'
import type { ProgressTracker } from './tracker.js'

/**
 * Made on first use, not when the module loads: the first `Intl.Segmenter` of a process
 * loads ICU's break rules (about 10 ms), and every `dsh` command loads this module, while
 * only a live terminal ever segments.
 */
let segmenter: Intl.Segmenter | undefined

function graphemes(text: string): Intl.Segments {
  segmenter ??= new Intl.Segmenter(undefined, { granularity: 'grapheme' })
  return segmenter.segment(text)
}

/** Recent lines remembered, so a budget event the log has just said is not said twice. */
const RECENT_LINES = 16

export interface LiveTerminalOptions {
  out: NodeJS.WriteStream
  palette: Palette
  /** The tree drawn below the text; none with `--quiet`. */
  tracker?: ProgressTracker
  /**
   * Standard error when it is the same terminal: while the view is live, the lines written
   * to it (the framework's warnings, such as a budget's 80% line) are written above the
   * live rows instead, since a line written past them would be moved back over and erased
   * in part by the next frame.
   */
  stderr?: NodeJS.WriteStream
  intervalMs?: number
}

export class LiveTerminal {
  /** Rows of the last frame, which the next one moves back over. */
  private drawnRows = 0
  /** Prompts standing the view aside; nothing is drawn while any is up. */
  private asides = 0
  /** Whole rows that became permanent since the last frame, painted, each ending in a newline. */
  private settled = ''
  /** The streamed row not finished yet (printable text, at most the width). */
  private row = ''
  private rowColumns = 0
  /** Some text has streamed: the tree keeps a blank row between it and the text. */
  private streamed = false
  private readonly recent: string[] = []
  private readonly timer: NodeJS.Timeout
  private restoreStderr: (() => void) | undefined
  private stopped = false

  constructor(private readonly options: LiveTerminalOptions) {
    const { tracker, stderr } = options
    tracker?.onChange((change) => {
      // A budget event is also a warning in the framework's log (written above by now):
      // its note is for when that log line is not shown.
      if (change.kind === 'budget') {
        if (!this.recent.some((line) => line.includes(change.text))) this.note(`dsh: ${change.text}`)
      } else if (change.kind === 'start' || change.kind === 'end' || change.kind === 'queued') this.draw()
    })
    // Elapsed times tick even when nothing else changed.
    this.timer = setInterval(() => this.draw(), options.intervalMs ?? 100)
    this.timer.unref()
    if (stderr) this.restoreStderr = this.takeLines(stderr)
  }

  /** Text the root writes, as it arrives: wrapped at the width by words, its last row redrawn until it is whole. */
  text(delta: string): void {
    const width = this.width()
    this.streamed = true
    for (const { segment } of graphemes(printable(delta))) {
      if (segment === '\n') {
        this.settleRow()
        continue
      }
      // A tab to the next stop of eight: its width is then known.
      const piece = segment === '\t' ? ' '.repeat(8 - (this.rowColumns % 8)) : segment
      const columns = segment === '\t' ? piece.length : columnWidth(segment)
      if (this.rowColumns + columns > width) this.wrapRow()
      this.row += piece
      this.rowColumns += columns
    }
    this.draw()
  }

  /** The streamed text stops here (its step went on to call tools): what comes next starts on a row of its own. */
  endText(): void {
    if (this.row) this.settleRow()
  }

  /** A whole line that stays, written above the live rows (its control characters shown, never acted on). */
  line(text: string, tone?: Tone): void {
    const plain = printable(text.replace(/\n+$/, ''))
    this.recent.push(plain)
    if (this.recent.length > RECENT_LINES) this.recent.shift()
    for (const each of plain.split('\n')) this.settled += `${tone ? this.options.palette.paint(tone, each) : each}\n`
    this.draw()
  }

  /** A notice or a log line: painted as its first words say (a warning, an error). */
  note(text: string): void {
    this.line(text, toneOfLine(text))
  }

  /** Erase the live rows and stop drawing (a prompt is on screen); the returned function draws them again. */
  standAside(): () => void {
    this.options.out.write(this.erase())
    this.drawnRows = 0
    this.asides++
    let back = false
    return () => {
      if (back) return
      back = true
      this.asides--
      this.draw()
    }
  }

  /** The last frame: the streamed row finished, the tree as it ended; standard error is given back. Idempotent. */
  stop(): void {
    if (this.stopped) return
    clearInterval(this.timer)
    this.asides = 0
    this.endText()
    this.draw()
    this.stopped = true
    this.restoreStderr?.()
    this.restoreStderr = undefined
  }

  draw(): void {
    if (this.asides > 0 || this.stopped) return
    const width = this.width()
    const tree = this.options.tracker ? treeLines(this.options.tracker, Date.now(), width, this.options.palette) : []
    const live = [...(this.row ? [this.row] : []), ...(tree.length > 0 && this.streamed ? [''] : []), ...tree]
    this.options.out.write(this.erase() + this.settled + live.map((line) => `${line}\n`).join(''))
    this.settled = ''
    this.drawnRows = live.length
  }

  /** Columns a row may take: one short of the terminal's, so a full row never wraps on its own. */
  private width(): number {
    return Math.max(20, (this.options.out.columns ?? 100) - 1)
  }

  private settleRow(): void {
    this.settled += `${this.row}\n`
    this.row = ''
    this.rowColumns = 0
  }

  /** The row is full: settle it up to its last space (a word longer than a row is cut). */
  private wrapRow(): void {
    const space = this.row.lastIndexOf(' ')
    if (space <= 0) return this.settleRow()
    const rest = this.row.slice(space + 1)
    this.row = this.row.slice(0, space).trimEnd()
    this.settleRow()
    this.row = rest
    this.rowColumns = columnWidth(rest)
  }

  /** The escape sequence that takes the cursor back over the last frame and clears below. */
  private erase(): string {
    return this.drawnRows > 0 ? `\x1b[${this.drawnRows}F\x1b[J` : ''
  }

  /** Route `stream`'s whole lines through `note` until the returned function gives the stream back. */
  private takeLines(stream: NodeJS.WriteStream): () => void {
    const own = Object.hasOwn(stream, 'write')
    const original = stream.write
    let pending = ''
    stream.write = ((chunk: string | Uint8Array, encoding?: BufferEncoding | ((error?: Error | null) => void), callback?: (error?: Error | null) => void): boolean => {
      pending += typeof chunk === 'string' ? chunk : Buffer.from(chunk).toString('utf8')
      const lines = pending.split('\n')
      pending = lines.pop()!
      for (const line of lines) this.note(line)
      const done = typeof encoding === 'function' ? encoding : callback
      if (done) process.nextTick(done)
      return true
    }) as typeof stream.write
    return () => {
      if (own) stream.write = original
      else delete (stream as { write?: unknown }).write
      if (pending) stream.write(`${pending}\n`)
    }
  }
}
