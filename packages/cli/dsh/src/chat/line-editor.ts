/**
 * The prompt line of `dsh chat`, on Node's own `readline` (no dependency; it redraws one
 * line in place, which is all a prompt needs). One listener owns the terminal's input for
 * the whole session and hands each key to whoever is reading it now:
 *
 * - at the prompt, to a fresh `readline` interface (editing, Up and Down through the
 *   history), made for each prompt and closed once it is answered, so nothing is left
 *   listening while a turn runs;
 * - while a turn runs, only Ctrl-C counts (the turn is cancelled); other keys are dropped,
 *   so what is typed at a running turn can neither garble the live tree nor answer a
 *   question it has not asked yet;
 * - while the permission prompt asks, to nobody here: it reads the terminal itself.
 *
 * A paste (bracketed by the terminal, or seen as input too large or with a line break inside
 * to have been typed) never goes through `readline`, whose redraw of a long line grows with
 * its length at every key: its lines join the prompt being written, shown in a few lines.
 * A prompt is bounded (`MAX_PROMPT_BYTES`): what would make it larger is refused in one line.
 * Bytes that are not UTF-8 are decoded as U+FFFD, shown and sent as such.
 */
import { createInterface } from 'node:readline'
import { PassThrough } from 'node:stream'
import { StringDecoder } from 'node:string_decoder'
import { printable } from '@dsh/base'
import { truncateColumns } from '@dsh/subagent'
import type { Palette } from '../progress/colors.js'
import { HISTORY_ENTRIES, type PromptHistory } from './history.js'

/** The most a prompt may hold, pasted or typed. */
export const MAX_PROMPT_BYTES = 256 * 1024
/** Input this large in one piece was not typed: it is taken as a paste. */
const TYPED_PIECE_LIMIT = 512
/** The editor's own line is kept at most this long (its redraw costs the whole line at every key). */
const EDITOR_LINE_LIMIT = 4096
/** Pasted lines shown on screen; the rest are counted. */
const PASTE_LINES_SHOWN = 3

const PASTE_START = '\x1b[200~'
const PASTE_END = '\x1b[201~'
const BRACKETED_PASTE_ON = '\x1b[?2004h'
const BRACKETED_PASTE_OFF = '\x1b[?2004l'

export const PROMPT = '› '
export const CONTINUATION = '… '

/** What a read of the prompt ended with. */
export type PromptRead =
  | { kind: 'prompt'; text: string }
  /** Ctrl-C at an empty prompt. */
  | { kind: 'interrupt' }
  /** Ctrl-C with something written: it was thrown away. */
  | { kind: 'cleared' }
  /** Ctrl-D at an empty prompt, the end of input, or `end()`. */
  | { kind: 'end' }

export interface LineEditorOptions {
  input: NodeJS.ReadStream
  output: NodeJS.WriteStream
  history: PromptHistory
  palette: Palette
  maxPromptBytes?: number
}

/** Who gets the keys now. */
type Mode =
  | { kind: 'idle' }
  | { kind: 'reading'; typed(text: string): void; pasted(text: string, bytes: number, bracketed: boolean): void }
  | { kind: 'turn'; interrupt(): void }
  | { kind: 'aside' }

export class LineEditor {
  private mode: Mode = { kind: 'idle' }
  private readonly decoder = new StringDecoder('utf8')
  /** A bracketed paste under way: its text (up to the bound) and its whole size. */
  private paste: { text: string; bytes: number } | undefined
  private ended = false
  private endRead: (() => void) | undefined
  private readonly onData = (chunk: Buffer | string) => this.route(typeof chunk === 'string' ? chunk : this.decoder.write(chunk))

  constructor(private readonly options: LineEditorOptions) {
    options.input.on('data', this.onData)
  }

  /** The prompts remembered; the session adds each one it reads. */
  get history(): PromptHistory {
    return this.options.history
  }

  private get maxBytes(): number {
    return this.options.maxPromptBytes ?? MAX_PROMPT_BYTES
  }

  /** Read one prompt: Enter sends it; a line ending in `\` (or Alt-Enter) goes on to the next line. */
  read(): Promise<PromptRead> {
    if (this.ended) return Promise.resolve({ kind: 'end' })
    const { input, output, palette } = this.options
    const keys = Object.assign(new PassThrough(), {
      isTTY: true,
      isRaw: false,
      setRawMode(raw: boolean) {
        input.setRawMode?.(raw)
        keys.isRaw = raw
        return keys
      },
    })
    const rl = createInterface({ input: keys, output, terminal: true, prompt: PROMPT, history: this.options.history.recall(), historySize: HISTORY_ENTRIES, removeHistoryDuplicates: true, tabSize: 4 })
    /** The lines written so far, before the one being edited. */
    const lines: string[] = []
    /** A paste was refused and it was not bracketed: its further pieces are dropped until something is typed. */
    let dropping = false
    const pendingBytes = () => lines.reduce((sum, line) => sum + Buffer.byteLength(line) + 1, 0) + Buffer.byteLength(rl.line)
    const clearEditor = () => {
      rl.write(null, { ctrl: true, name: 'e' })
      rl.write(null, { ctrl: true, name: 'u' })
    }
    const width = () => Math.max(10, (output.columns ?? 80) - 1)
    const refuse = (bytes: number) => {
      lines.length = 0
      clearEditor()
      output.write(`\r\x1b[K${palette.paint('warning', `dsh: a prompt of ${sizeOf(bytes)} was refused: one holds at most ${sizeOf(this.maxBytes)}; put the text in a file and name the file in your prompt`)}\n`)
      rl.setPrompt(PROMPT)
      rl.prompt()
    }
    return new Promise<PromptRead>((resolvePromise) => {
      let settled = false
      const settle = (read: PromptRead) => {
        if (settled) return
        settled = true
        this.mode = { kind: 'idle' }
        this.endRead = undefined
        rl.close()
        keys.destroy()
        output.write(BRACKETED_PASTE_OFF)
        resolvePromise(read)
      }
      this.endRead = () => settle({ kind: 'end' })
      rl.on('line', (line) => {
        if (line.endsWith('\\')) {
          lines.push(line.slice(0, -1))
          rl.setPrompt(CONTINUATION)
          return rl.prompt()
        }
        lines.push(line)
        const text = lines.join('\n')
        if (!text.trim()) {
          lines.length = 0
          rl.setPrompt(PROMPT)
          return rl.prompt()
        }
        settle({ kind: 'prompt', text })
      })
      rl.on('SIGINT', () => {
        const written = rl.line !== '' || lines.length > 0
        output.write(written ? '^C\n' : '\n')
        settle({ kind: written ? 'cleared' : 'interrupt' })
      })
      rl.on('close', () => settle({ kind: 'end' }))
      const typed = (text: string) => {
        dropping = false
        // Alt-Enter: a new line without sending, as a trailing backslash does.
        const keysText = text.replaceAll('\x1b\r', '\\\r')
        if (rl.line.length + keysText.length > EDITOR_LINE_LIMIT) return pasted(keysText, Buffer.byteLength(keysText), false)
        keys.write(keysText)
      }
      const pasted = (text: string, bytes: number, bracketed: boolean) => {
          if (dropping) return
          if (pendingBytes() + bytes > this.maxBytes) {
            refuse(pendingBytes() + bytes)
            // A bracketed paste was refused whole; the rest of one that was not is still arriving.
            dropping = !bracketed
            return
          }
          const clean = pastedText(text)
          if (!clean.includes('\n') && rl.line.length + clean.length <= EDITOR_LINE_LIMIT) return void keys.write(clean)
          const pieces = clean.split('\n')
          pieces[0] = rl.line + pieces[0]!
          // The last piece goes on being edited, when it is short enough to edit.
          const last = pieces.at(-1)!.length <= EDITOR_LINE_LIMIT ? pieces.pop()! : ''
          const first = lines.length === 0
          clearEditor()
          lines.push(...pieces)
          const shown = pieces.slice(0, PASTE_LINES_SHOWN).map((piece, index) => `${index === 0 && first ? PROMPT : CONTINUATION}${truncateColumns(printable(piece), width() - 2)}`)
          const more = pieces.length - PASTE_LINES_SHOWN
          if (more > 0) shown.push(palette.paint('dim', `  [${more} more pasted ${more === 1 ? 'line' : 'lines'}; ${sizeOf(pendingBytes())} in all]`))
          output.write(`\r\x1b[K${shown.join('\n')}\n`)
          rl.setPrompt(CONTINUATION)
          rl.prompt()
          if (last) keys.write(last)
      }
      this.mode = { kind: 'reading', typed, pasted }
      input.setRawMode?.(true)
      input.resume()
      output.write(BRACKETED_PASTE_ON)
      rl.prompt()
    })
  }

  /** While a turn runs: Ctrl-C calls `interrupt`, other keys are dropped. Returns the undo. */
  duringTurn(interrupt: () => void): () => void {
    const { input } = this.options
    this.mode = { kind: 'turn', interrupt }
    input.setRawMode?.(true)
    input.resume()
    return () => {
      if (this.mode.kind === 'turn') this.mode = { kind: 'idle' }
    }
  }

  /**
   * The permission prompt reads the terminal itself: keys are its until the returned
   * function is called, which takes the input back (the prompt pauses it when it is done).
   */
  standAside(): () => void {
    const before = this.mode
    this.mode = { kind: 'aside' }
    let back = false
    return () => {
      if (back) return
      back = true
      this.mode = before
      this.options.input.setRawMode?.(true)
      this.options.input.resume()
    }
  }

  /** The session is leaving: a read under way ends, and so does every later one. */
  end(): void {
    this.ended = true
    this.endRead?.()
  }

  /** Give the terminal back as it was found. */
  close(): void {
    this.end()
    const { input } = this.options
    input.off('data', this.onData)
    input.setRawMode?.(false)
    input.pause()
  }

  private route(text: string): void {
    const mode = this.mode
    if (mode.kind === 'turn') {
      if (text.includes('\x03')) mode.interrupt()
      return
    }
    if (mode.kind !== 'reading') return
    let rest = text
    while (rest) {
      if (this.paste) {
        const end = rest.indexOf(PASTE_END)
        this.takePaste(end < 0 ? rest : rest.slice(0, end))
        if (end < 0) return
        const { text: pasted, bytes } = this.paste
        this.paste = undefined
        rest = rest.slice(end + PASTE_END.length)
        mode.pasted(pasted, bytes, true)
        continue
      }
      const start = rest.indexOf(PASTE_START)
      const typed = start < 0 ? rest : rest.slice(0, start)
      if (typed) {
        if (looksPasted(typed)) mode.pasted(typed, Buffer.byteLength(typed), false)
        else mode.typed(typed)
      }
      if (start < 0) return
      this.paste = { text: '', bytes: 0 }
      rest = rest.slice(start + PASTE_START.length)
    }
  }

  /** A piece of a bracketed paste: counted whole, kept only up to the bound. */
  private takePaste(piece: string): void {
    const paste = this.paste!
    paste.bytes += Buffer.byteLength(piece)
    if (paste.bytes <= this.maxBytes) paste.text += piece
  }
}

/** Too large to have been typed, or a line break with more after it. */
function looksPasted(text: string): boolean {
  return text.length > TYPED_PIECE_LIMIT || /[\r\n][^]/.test(text.replace(/\x1b\r/g, ''))
}

/** A paste as prompt text: line breaks as `\n`, tabs kept, other control characters and escape sequences dropped. */
export function pastedText(text: string): string {
  return text
    .replace(/\r\n?/g, '\n')
    .replace(/\x1b\[[0-9;?]*[ -/]*[@-~]/g, '')
    .replace(/[\x00-\x08\x0b-\x1f\x7f-\x9f]/g, '')
}

export function sizeOf(bytes: number): string {
  return bytes >= 1024 * 1024 ? `${(bytes / (1024 * 1024)).toFixed(1)} MB` : bytes >= 1024 ? `${Math.round(bytes / 1024)} KB` : `${bytes} bytes`
}
