/**
 * The prompts a user typed in `dsh chat`, kept in memory for the line editor's Up and Down
 * and in `$DSH_HOME/chat-history.jsonl`, so the next session recalls them too. One JSON
 * string a line (a prompt may hold newlines); bounded in count and in the size of one
 * entry, since a pasted page is not worth recalling and must not grow the file unbounded.
 */
import { appendFileSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import { dirname } from 'node:path'

/** Prompts remembered, in memory and on disk. */
export const HISTORY_ENTRIES = 500
/** A longer prompt is sent but not remembered. */
export const HISTORY_ENTRY_BYTES = 4096

export class PromptHistory {
  /** Oldest first. */
  private entries: string[] = []
  /** Lines in the file; past twice the bound it is rewritten with the newest entries only. */
  private fileLines = 0

  constructor(private readonly file: string | undefined, private readonly max = HISTORY_ENTRIES) {
    if (file === undefined) return
    let text = ''
    try {
      text = readFileSync(file, 'utf8')
    } catch {
      // No history yet (or unreadable): the session starts with none and writes a new one.
      return
    }
    const lines = text.split('\n').filter(Boolean)
    this.fileLines = lines.length
    for (const line of lines.slice(-max)) {
      try {
        const entry: unknown = JSON.parse(line)
        if (typeof entry === 'string' && entry) this.entries.push(entry)
      } catch {
        // A torn or edited line is skipped, never fatal: history is a convenience.
      }
    }
  }

  /** Newest first, one line each, as the line editor recalls them (a multi-line prompt on one line). */
  recall(): string[] {
    return this.entries.map((entry) => entry.replace(/\s*\n\s*/g, ' ')).reverse()
  }

  /** Remember `prompt` (not when it repeats the last one, nor when it is too large). */
  add(prompt: string): void {
    if (!prompt.trim() || Buffer.byteLength(prompt) > HISTORY_ENTRY_BYTES || this.entries.at(-1) === prompt) return
    this.entries.push(prompt)
    if (this.entries.length > this.max) this.entries.shift()
    if (this.file === undefined) return
    try {
      mkdirSync(dirname(this.file), { recursive: true })
      if (++this.fileLines > 2 * this.max) {
        writeFileSync(this.file, this.entries.map((entry) => `${JSON.stringify(entry)}\n`).join(''), { mode: 0o600 })
        this.fileLines = this.entries.length
      } else appendFileSync(this.file, `${JSON.stringify(prompt)}\n`, { mode: 0o600 })
    } catch {
      // A read-only home keeps the history in memory for this session only.
    }
  }
}
