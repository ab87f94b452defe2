/**
 * The pieces of `dsh chat` that need no terminal: its prompt history (kept across sessions,
 * bounded in entries and in the size of one, a torn line skipped), its slash commands'
 * parsing (the nearest known one for a typo) and what a paste becomes as prompt text.
 */
import { readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { HISTORY_ENTRY_BYTES, PromptHistory } from '../src/chat/history.js'
import { pastedText } from '../src/chat/line-editor.js'
import { parseSlash } from '../src/chat/slash.js'
import { tempDir } from './cli.js'

describe('dsh chat history', () => {
  it('is recalled by the next session, newest first, a multi-line prompt on one line', () => {
    const file = join(tempDir(), 'chat-history.jsonl')
    const first = new PromptHistory(file)
    first.add('one')
    first.add('two\nlines')
    first.add('two\nlines')
    expect(new PromptHistory(file).recall()).toEqual(['two lines', 'one'])
  })

  it('keeps the newest entries only, in memory and on disk, and leaves out a prompt too large to recall', () => {
    const file = join(tempDir(), 'chat-history.jsonl')
    const history = new PromptHistory(file, 3)
    for (let index = 0; index < 10; index++) history.add(`prompt ${index}`)
    history.add('x'.repeat(HISTORY_ENTRY_BYTES + 1))
    expect(history.recall()).toEqual(['prompt 9', 'prompt 8', 'prompt 7'])
    // The file is rewritten once it holds twice the bound: it never grows past that.
    expect(readFileSync(file, 'utf8').split('\n').filter(Boolean).length).toBeLessThanOrEqual(6)
    expect(new PromptHistory(file, 3).recall()).toEqual(['prompt 9', 'prompt 8', 'prompt 7'])
  })

  it('skips a torn or foreign line instead of failing', () => {
    const file = join(tempDir(), 'chat-history.jsonl')
    writeFileSync(file, '"kept"\n{"not":"a string"}\n"torn\n')
    expect(new PromptHistory(file).recall()).toEqual(['kept'])
  })
})

describe('dsh chat slash commands', () => {
  it('finds a command and its argument', () => {
    const parsed = parseSlash('/model scripted:x.yml')
    expect('command' in parsed && [parsed.command.name, parsed.argument]).toEqual(['model', 'scripted:x.yml'])
  })

  it('answers a typo with the nearest command, and a word near none with the list', () => {
    expect(parseSlash('/cots')).toEqual({ problem: expect.stringContaining('dsh: no command /cots; did you mean /cost?') })
    const far = parseSlash('/frobnicate')
    expect('problem' in far && far.problem).toMatch(/^dsh: no command \/frobnicate \(\/help lists them/)
  })
})

describe('a paste as prompt text', () => {
  it('keeps lines and tabs and drops escape sequences and control characters', () => {
    expect(pastedText('a\r\nb\rc\td\x1b[31mred\x1b[0m\x07')).toBe('a\nb\nc\tdred')
  })
})
