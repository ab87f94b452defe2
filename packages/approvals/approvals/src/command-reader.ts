/**
 * A conservative reading of a shell command in one pass, linear in its length: its simple
 * commands (split at unquoted `;`, `&`, `|`, `&&`, `||`, newlines), their unquoted words,
 * the commands inside substitutions, and whether each is *plain* (made only of what this
 * reading understands completely). Not a shell: what it does not follow exactly is marked
 * not plain, or `unsure` where even what runs is in doubt, so it is asked, never allowed.
 */

import { HARMLESS_BUILTINS, SHELL_WORDS } from './shell-words.js'

/** One word of a simple command as the shell would pass it, as far as this reading can tell. */
export interface ReadWord {
  /** The word with quotes and backslashes removed; where it holds an expansion, that expansion's text as written. */
  value: string
  /** No expansion of any kind: `value` is exactly what the shell passes. */
  literal: boolean
  /** Holds an unquoted `*`, `?` or `[`: the shell may replace it with file names. */
  glob: boolean
  /** Begins with an unquoted `NAME=` / `NAME+=`: a variable assignment where it precedes the command word. */
  assignment: boolean
}

export interface ReadSegment {
  /** The simple command's text as written, trimmed. */
  text: string
  /** Made only of what this reading understands completely. */
  plain: boolean
  /** Holds something that could run code this reading does not see (`${…}`, `$[…]`, `$((…))`, an arithmetic or `[[` command, a function definition…). */
  unsure: boolean
  words: ReadWord[]
  /** Inside a substitution, a subshell or a string a command runs (not one of the command's own simple commands). */
  nested: boolean
}

export interface CommandReading {
  /** The command's own simple commands, in order. */
  top: ReadSegment[]
  /** Those and every simple command found inside them (substitutions, subshells, groups). */
  all: ReadSegment[]
  /** The reading lost track (an unclosed quote or substitution, a here-document without its end, `case`, too deep): nothing in it is plain, and its command words are not sure. */
  broken: boolean
}

/** How deep substitutions and subshells are followed; deeper, the reading is broken. */
const MAX_NESTING = 32
const NAME_START = /[A-Za-z_]/
const NAME_CHAR = /[A-Za-z0-9_]/
const ASSIGNMENT = /^[A-Za-z_][A-Za-z0-9_]*\+?=/
/** Characters a plain word may hold unquoted, besides letters and digits (and any character from U+0080 on). */
const PLAIN_PUNCTUATION = new Set(['-', '_', '.', '/', ':', ',', '=', '+', '@', '%', '^', '*', '?'])
/** Characters that end a word where they stand unquoted. */
const WORD_END = new Set([' ', '\t', '\n', ';', '&', '|', '<', '>', '(', ')'])

export function readCommand(command: string, nesting = 0): CommandReading {
  const reader = new Reader(command)
  const top = reader.commands(0, undefined, nesting, false).segments
  if (reader.broken) for (const segment of reader.all) Object.assign(segment, { plain: false, unsure: true })
  return { top, all: reader.all, broken: reader.broken }
}

class SegmentBuilder {
  words: ReadWord[] = []
  plain = true
  unsure = false
  private word: ReadWord | undefined
  private wordStart = 0
  /** The next word is a redirection's target, not an argument. */
  target = false

  constructor(readonly start: number) {}
  get inWord(): boolean {
    return this.word !== undefined
  }

  /** The word being read (started at `at` if none is). */
  current(at: number): ReadWord {
    if (this.word === undefined) {
      this.word = { value: '', literal: true, glob: false, assignment: false }
      this.wordStart = at
    }
    return this.word
  }

  endWord(source: string, at: number): void {
    const word = this.word
    if (word === undefined) return
    this.word = undefined
    if (this.target) {
      this.target = false
      return
    }
    word.assignment = ASSIGNMENT.test(source.slice(this.wordStart, Math.min(at, this.wordStart + 256)))
    // `[` (test) and `[[` alone are words of the shell, not globs.
    if (word.literal && (word.value === '[' || word.value === ']' || word.value === '[[' || word.value === ']]')) word.glob = false
    this.words.push(word)
  }

  /** A redirection operator: a word of digits just before it is its file descriptor, and the next word its target. */
  redirection(source: string, at: number): void {
    this.plain = false
    if (this.word !== undefined && /^[0-9]+$/.test(source.slice(this.wordStart, at))) this.word = undefined
    else this.endWord(source, at)
    this.target = true
  }
}

class Reader {
  readonly all: ReadSegment[] = []
  broken = false
  /** Here-documents whose bodies start after the current line. */
  private hereDocuments: { delimiter: string; quoted: boolean; stripTabs: boolean }[] = []

  constructor(private readonly source: string) {}
  /**
   * Simple commands from `index` until `close` (unmatched, at this level) or the end.
   * Returns the index after `close`.
   */
  commands(index: number, close: ')' | undefined, nesting: number, nested: boolean): { end: number; segments: ReadSegment[] } {
    const segments: ReadSegment[] = []
    const source = this.source
    if (nesting > MAX_NESTING) {
      this.broken = true
      return { end: source.length, segments }
    }
    let segment = new SegmentBuilder(index)
    const finish = (at: number) => {
      segment.endWord(source, at)
      const text = source.slice(segment.start, at).trim()
      if (text !== '') {
        const read: ReadSegment = { text, plain: segment.plain, unsure: segment.unsure, words: segment.words, nested }
        this.judge(read)
        segments.push(read)
        this.all.push(read)
      }
    }
    let i = index
    while (i < source.length) {
      const char = source[i]!
      const next = source[i + 1]
      if (char === ')' && close === ')') {
        finish(i)
        return { end: i + 1, segments }
      }
      if (char === ' ' || char === '\t') {
        segment.endWord(source, i)
        i++
      } else if (char === '\n' || char === ';' || char === '|' || (char === '&' && next !== '>')) {
        finish(i)
        i++
        // Here-documents started on this line: their bodies come next.
        if (char === '\n' && this.hereDocuments.length > 0) i = this.hereDocumentBodies(i, segment, nesting)
        // `&&`, `||`, `|&`, `;;`, `;&`, `;;&`: one separator.
        if (char !== '\n') while (i < source.length && (source[i] === '&' || source[i] === '|' || source[i] === ';')) i++
        segment = new SegmentBuilder(i)
      } else if (char === '&') {
        // `&>` and `&>>`: a redirection of both outputs.
        segment.redirection(source, i)
        i += source[i + 2] === '>' ? 3 : 2
      } else if ((char === '<' || char === '>') && next === '(') {
        // A process substitution: its commands run.
        segment.plain = false
        const word = segment.current(i)
        word.literal = false
        word.value += `${char}(…)`
        i = this.commands(i + 2, ')', nesting + 1, true).end
      } else if (char === '<' && next === '<' && source[i + 2] !== '<') {
        segment.redirection(source, i)
        i = this.hereDocument(segment, i + 2)
      } else if (char === '<' || char === '>') {
        segment.redirection(source, i)
        i++
        let operator = 0
        while (operator < 2 && i < source.length && (source[i] === '<' || source[i] === '>' || source[i] === '&' || source[i] === '|' || source[i] === '-')) {
          i++
          operator++
        }
      } else if (char === '(') {
        // A subshell, an arithmetic command, a function definition, an array or an extended glob.
        segment.plain = false
        if (segment.inWord || segment.words.length > 0 || next === '(') segment.unsure = true
        if (segment.inWord) segment.current(i).literal = false
        i = this.commands(i + 1, ')', nesting + 1, true).end
      } else if (char === ')') {
        // Unmatched: the shell reads this otherwise (a `case` pattern, or an error).
        this.broken = true
        segment.endWord(source, i)
        i++
      } else if (char === '#' && !segment.inWord) {
        // A comment, to the end of the line: no quote in it counts.
        segment.plain = false
        const end = source.indexOf('\n', i)
        i = end === -1 ? source.length : end
      } else {
        i = this.wordPart(segment, i, nesting)
      }
    }
    if (close !== undefined || this.hereDocuments.length > 0) this.broken = true
    finish(source.length)
    return { end: source.length, segments }
  }

  /** One piece of a word at `i` (a character, a quoted string, an expansion); returns the index after it. */
  private wordPart(segment: SegmentBuilder, i: number, nesting: number): number {
    const source = this.source
    const char = source[i]!
    const next = source[i + 1]
    const starting = !segment.inWord
    const word = segment.current(i)
    const code = char.charCodeAt(0)
    if (char === "'") {
      const end = source.indexOf("'", i + 1)
      if (end === -1) return this.lost()
      word.value += source.slice(i + 1, end)
      if (source.slice(i + 1, end).includes('\n')) segment.plain = false
      return end + 1
    }
    if (char === '"') return this.doubleQuoted(segment, word, i + 1, nesting)
    if (char === '\\') {
      if (next === undefined) {
        segment.plain = false
        word.value += '\\'
        return i + 1
      }
      // A backslash-newline joins the lines: read on as the shell does, but not plain.
      if (next === '\n') segment.plain = false
      else word.value += next
      return i + 2
    }
    if (char === '$') return this.dollar(segment, word, i, nesting, false)
    if (char === '`') return this.backquoted(segment, word, i, nesting)
    if ((char === '{' || char === '}') && starting && (next === undefined || WORD_END.has(next))) {
      // `{` and `}` alone: a group's keywords.
      segment.plain = false
      word.value += char
      return i + 1
    }
    if (char === '{' || char === '}') {
      // Brace expansion: one word becomes several.
      segment.plain = false
      word.literal = false
      word.value += char
      return i + 1
    }
    if (char === '[' || char === ']') {
      // A glob's class, an array subscript (`a[…]=`, evaluated as arithmetic) or `[[`.
      segment.plain = false
      word.glob = true
      word.value += char
      return i + 1
    }
    if (char === '*' || char === '?') {
      word.glob = true
      word.value += char
      return i + 1
    }
    if (char === '~' && starting && !(next === undefined || next === '/' || WORD_END.has(next))) {
      // `~user`, `~+`, `~-`, `~1`: expansions beyond the home directory.
      segment.plain = false
      word.literal = false
    } else if (char === '!') {
      // Negation, or history expansion in an interactive shell.
      segment.plain = false
    } else if (!(NAME_CHAR.test(char) || PLAIN_PUNCTUATION.has(char) || char === '~' || code >= 0x80)) {
      // A control character or anything else this reading does not place.
      segment.plain = false
    }
    word.value += char
    return i + 1
  }

  private doubleQuoted(segment: SegmentBuilder, word: ReadWord, i: number, nesting: number): number {
    const source = this.source
    while (i < source.length) {
      const char = source[i]!
      if (char === '"') return i + 1
      if (char === '\\') {
        const next = source[i + 1]
        if (next === '\n') segment.plain = false
        else if (next === '$' || next === '`' || next === '"' || next === '\\') word.value += next
        else word.value += `\\${next ?? ''}`
        i += 2
      } else if (char === '$') {
        i = this.dollar(segment, word, i, nesting, true)
      } else if (char === '`') {
        i = this.backquoted(segment, word, i, nesting)
      } else {
        if (char === '\n' || char === '!' || char.charCodeAt(0) < 0x20) segment.plain = false
        word.value += char
        i++
      }
    }
    return this.lost()
  }

  /** `$…` at `i`. */
  private dollar(segment: SegmentBuilder, word: ReadWord, i: number, nesting: number, quoted: boolean): number {
    const source = this.source
    const next = source[i + 1]
    if (next === '(') {
      // `$(…)`, and `$((…))` (arithmetic, which evaluates what its variables hold): the commands run.
      segment.plain = false
      if (source[i + 2] === '(') segment.unsure = true
      word.literal = false
      word.value += '$(…)'
      return this.commands(i + 2, ')', nesting + 1, true).end
    }
    if (next === '{' || next === '[') {
      if (!quoted && source.startsWith('${IFS}', i)) {
        // Splits the word where the shell would (with IFS as it starts).
        segment.unsure = true
        segment.plain = false
        segment.endWord(source, i)
        return i + 6
      }
      // `${…}` (`${x@P}`, `${y[x]}`, `${x:x}`, `${x:=…}`) and `$[…]` can evaluate code.
      segment.plain = false
      segment.unsure = true
      word.literal = false
      word.value += source[i + 1] === '{' ? '${…}' : '$[…]'
      if (nesting + 1 > MAX_NESTING) return this.lost()
      return this.bracketed(segment, word, i + 2, next === '{' ? '{' : '[', next === '{' ? '}' : ']', nesting + 1)
    }
    if (next === "'" && !quoted) {
      // ANSI-C quoting, with escapes of its own.
      segment.plain = false
      word.literal = false
      let j = i + 2
      while (j < source.length && source[j] !== "'") j += source[j] === '\\' ? 2 : 1
      if (j >= source.length) return this.lost()
      word.value += source.slice(i, j + 1)
      return j + 1
    }
    if (next === '"' && !quoted) {
      // A translated string.
      segment.plain = false
      word.literal = false
      return this.doubleQuoted(segment, word, i + 2, nesting)
    }
    if (next !== undefined && NAME_START.test(next)) {
      let end = i + 2
      while (end < source.length && NAME_CHAR.test(source[end]!)) end++
      const name = source.slice(i + 1, end)
      if (name === 'IFS' && !quoted) {
        segment.unsure = true
        segment.plain = false
        segment.endWord(source, i)
        return end
      }
      word.literal = false
      word.value += `$${name}`
      return end
    }
    if (next !== undefined && (/[0-9]/.test(next) || '@*#?$!-'.includes(next))) {
      word.literal = false
      word.value += `$${next}`
      return i + 2
    }
    word.value += '$'
    return i + 1
  }

  /** The inside of `${…}` or `$[…]` from `i`: nested openings counted, quotes and substitutions followed. */
  private bracketed(segment: SegmentBuilder, word: ReadWord, i: number, open: string, close: string, nesting: number): number {
    const source = this.source
    let depth = 1
    while (i < source.length) {
      const char = source[i]!
      if (char === close && --depth === 0) return i + 1
      if (char === open) depth++
      if (char === '\\') i += 2
      else if (char === '$') i = this.dollar(segment, word, i, nesting, false)
      else if (char === '`') i = this.backquoted(segment, word, i, nesting)
      else if (char === '"') i = this.doubleQuoted(segment, word, i + 1, nesting)
      else if (char === "'") {
        const end = source.indexOf("'", i + 1)
        if (end === -1) return this.lost()
        i = end + 1
      } else i++
    }
    return this.lost()
  }

  /** A backquoted command at `i`: read as a command of its own, its backslash escapes removed. */
  private backquoted(segment: SegmentBuilder, word: ReadWord, i: number, nesting: number): number {
    const source = this.source
    segment.plain = false
    word.literal = false
    word.value += '`…`'
    let body = ''
    let j = i + 1
    while (j < source.length && source[j] !== '`') {
      if (source[j] === '\\' && (source[j + 1] === '`' || source[j + 1] === '\\' || source[j + 1] === '$')) {
        body += source[j + 1]
        j += 2
      } else body += source[j++]
    }
    if (j >= source.length) return this.lost()
    if (nesting + 1 > MAX_NESTING) return this.lost()
    const inner = readCommand(body, nesting + 1)
    if (inner.broken) this.broken = true
    for (const found of inner.all) this.all.push({ ...found, nested: true })
    return j + 1
  }

  /** `<<WORD` / `<<-WORD` from `i` (after `<<`): its delimiter, whose body is read after the line ends. */
  private hereDocument(segment: SegmentBuilder, i: number): number {
    const source = this.source
    const stripTabs = source[i] === '-'
    if (stripTabs) i++
    while (source[i] === ' ' || source[i] === '\t') i++
    const start = i
    let delimiter = ''
    let quoted = false
    while (i < source.length && !WORD_END.has(source[i]!)) {
      const char = source[i]!
      if (char === "'" || char === '"') {
        const end = source.indexOf(char, i + 1)
        if (end === -1) return this.lost()
        delimiter += source.slice(i + 1, end)
        quoted = true
        i = end + 1
      } else if (char === '\\') {
        delimiter += source[i + 1] ?? ''
        quoted = true
        i += 2
      } else {
        if (char === '$' || char === '`') this.broken = true
        delimiter += char
        i++
      }
    }
    if (i === start) return this.lost()
    // The delimiter was the redirection's target.
    segment.target = false
    this.hereDocuments.push({ delimiter, quoted, stripTabs })
    return i
  }

  /**
   * The bodies of the here-documents started on the line that ended before `i`, up to their
   * delimiter lines. An unquoted delimiter's body is expanded by the shell: its substitutions
   * are read as commands. Returns the index after the last body.
   */
  private hereDocumentBodies(i: number, segment: SegmentBuilder, nesting: number): number {
    const source = this.source
    const documents = this.hereDocuments
    this.hereDocuments = []
    for (const document of documents) {
      for (;;) {
        if (i >= source.length) return this.lost()
        let lineEnd = source.indexOf('\n', i)
        if (lineEnd === -1) lineEnd = source.length
        let line = source.slice(i, lineEnd)
        if (document.stripTabs) line = line.replace(/^\t+/, '')
        if (line === document.delimiter) {
          i = lineEnd + 1
          break
        }
        if (!document.quoted) {
          const word: ReadWord = { value: '', literal: true, glob: false, assignment: false }
          let j = i
          while (j < lineEnd) {
            const char = source[j]!
            if (char === '\\') j += 2
            else if (char === '$') j = this.dollar(segment, word, j, nesting, true)
            else if (char === '`') j = this.backquoted(segment, word, j, nesting)
            else j++
          }
          // A substitution running past its line: the shell would have cut it at the line.
          if (j > lineEnd) return this.lost()
          if (segment.unsure) this.broken = true
        }
        i = lineEnd + 1
      }
    }
    return i
  }

  /** The reading cannot go on (an unclosed quote or substitution): everything is in doubt. */
  private lost(): number {
    this.broken = true
    return this.source.length
  }

  /** What a finished simple command's words say of it: a command word this reading cannot vouch for is not plain. */
  private judge(segment: ReadSegment): void {
    const command = segment.words.find((word) => !word.assignment)
    if (command === undefined) return
    if (!command.literal || command.glob) {
      segment.plain = false
      return
    }
    // `case` patterns end in `)`, which this reading would take for the end of a substitution.
    if (command.value === 'case') this.broken = true
    // A builtin or keyword of the shell may evaluate its arguments as code or arithmetic
    // (`declare`, `let`, `printf -v`, `test -v`, `eval`, `trap`…): only these few never do.
    if (SHELL_WORDS.has(command.value) && !HARMLESS_BUILTINS.has(command.value)) segment.plain = false
  }
}
