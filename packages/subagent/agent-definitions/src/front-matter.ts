/**
 * The one reader of Markdown files with YAML front matter (`---`, fields, `---`, a body):
 * agent definitions and skills (`@dsh/skills`' `SKILL.md`) alike. Every problem is a
 * `DefinitionError` whose message is one line starting `FILE:LINE:` (or `FILE:`): a user
 * fixes the file in an editor. What the fields mean is the caller's business.
 */
import { closeSync, fstatSync, openSync, readSync } from 'node:fs'
import { errorMessage, printable } from '@dsh/base'
import YAML, { isMap, isScalar, LineCounter, type Document } from 'yaml'
import { DefinitionError } from './errors.js'

/** One front-matter field, in the file's order, with its file line. */
export interface FrontMatterField {
  name: string
  /** The YAML value as plain data (scalars as they are, lists and mappings as JSON). */
  value: unknown
  line: number
}

export interface FrontMatter {
  fields: FrontMatterField[]
  /** The file line of the front matter's first line (2: after the opening `---`). */
  frontLine: number
  /** Everything after the closing `---`, untrimmed. */
  body: string
}

/**
 * The front matter and body of `text`; `file` names it in errors and `what` says what
 * such a file is (`a definition`, `a skill`) and what its body holds (`the instructions`).
 * Throws `DefinitionError('SYNTAX')`.
 */
export function parseFrontMatter(text: string, file: string, what: { file: string; body: string }): FrontMatter {
  const fail = (line: number, message: string): never => {
    throw new DefinitionError('SYNTAX', `${file}:${line}: ${message}`)
  }
  const lines = text.replace(/^\uFEFF/, '').split(/\r?\n/)
  if (lines[0]?.trimEnd() !== '---') fail(1, `${what.file} starts with YAML front matter: a line "---", the fields, another "---", then ${what.body}`)
  const end = lines.findIndex((line, index) => index > 0 && (line.trimEnd() === '---' || line.trimEnd() === '...'))
  if (end < 0) fail(1, `the front matter opened here is never closed: end it with a line "---" before ${what.body}`)
  const frontLine = 2
  const lineCounter = new LineCounter()
  const document: Document = YAML.parseDocument(lines.slice(1, end).join('\n'), { lineCounter, logLevel: 'silent', uniqueKeys: true })
  const fileLine = (offset: number | undefined) => (offset === undefined ? frontLine : frontLine + lineCounter.linePos(offset).line - 1)
  const [problem] = [...document.errors, ...document.warnings]
  if (problem) fail(fileLine(problem.pos[0]), `front matter is not valid YAML: ${problem.message.split('\n')[0]}`)
  const contents = document.contents
  if (!isMap(contents)) fail(frontLine, 'front matter must be a mapping of fields (name: …, description: …)')
  const fields: FrontMatterField[] = []
  for (const pair of (contents as YAML.YAMLMap).items) {
    const key = isScalar(pair.key) ? pair.key.value : undefined
    const line = fileLine(isScalar(pair.key) ? pair.key.range?.[0] : undefined)
    if (typeof key !== 'string') fail(line, 'a field name must be a word')
    const value: unknown = isScalar(pair.value) ? pair.value.value : (pair.value as { toJSON?: () => unknown } | null)?.toJSON?.() ?? null
    fields.push({ name: key as string, value, line })
  }
  return { fields, frontLine, body: lines.slice(end + 1).join('\n') }
}

/**
 * The text of `file`, read at most `maxBytes` + 1 bytes: a larger file is refused unread
 * (`TOO_LARGE`, with `tooLarge` saying why such a file should be small), a file holding
 * NUL bytes is not text (`SYNTAX`), anything unreadable is `UNREADABLE` naming the cause.
 * `noun` names what the file is in the messages (`definition`, `skill`).
 */
export function readFrontMatterFile(file: string, maxBytes: number, noun: string, tooLarge: string): string {
  let fd: number
  try {
    fd = openSync(file, 'r')
  } catch (error) {
    throw new DefinitionError('UNREADABLE', `${file}: cannot read the ${noun}: ${readProblem(error)}`)
  }
  try {
    const refuse = () => new DefinitionError('TOO_LARGE', `${file}: the ${noun} is larger than ${maxBytes / 1024 / 1024} MiB; ${tooLarge}`)
    if (fstatSync(fd).size > maxBytes) throw refuse()
    const buffer = Buffer.alloc(maxBytes + 1)
    let length = 0
    // A file that grows while it is read still stops at the bound.
    for (let read = -1; read !== 0 && length < buffer.length; length += read) read = readSync(fd, buffer, length, buffer.length - length, null)
    if (length > maxBytes) throw refuse()
    const text = buffer.subarray(0, length).toString('utf8')
    if (text.includes('\u0000')) throw new DefinitionError('SYNTAX', `${file}: the ${noun} is not text (it holds NUL bytes)`)
    return text
  } catch (error) {
    if (error instanceof DefinitionError) throw error
    throw new DefinitionError('UNREADABLE', `${file}: cannot read the ${noun}: ${readProblem(error)}`)
  } finally {
    closeSync(fd)
  }
}

/** Why a file or directory could not be read, in words (a symlink loop, permission denied, …). */
export function readProblem(error: unknown): string {
  const code = (error as NodeJS.ErrnoException).code
  if (code === 'ELOOP') return 'a symlink loop'
  if (code === 'EACCES') return 'permission denied'
  if (code === 'EISDIR') return 'it is a directory'
  return printable(errorMessage(error).replace(/^[A-Z]+: /, ''))
}
