import { createHash } from 'node:crypto'
import { normalize } from 'node:path'
import { formsOfReading, type RestrictiveForms } from './command-forms.js'
import { readCommand, type CommandReading } from './command-reader.js'

/**
 * What a side effect is about, as rules and people see it: the *subject* of a call (a
 * command for a tool that runs one, a path for one that writes a file, the arguments as
 * compact JSON otherwise), and, for a command, its simple commands, so a rule that allows
 * `npm test*` never allows `npm test && rm -rf ~` by accident.
 */

/** How a call is classed for a front-end (ACP's tool kinds use the same words). */
export type ApprovalKind = 'execute' | 'edit' | 'other'

export interface CallSubject {
  /** The subject rules match against, whole (up to `MAX_SUBJECT_CHARS`). */
  text: string
  /** False when the call's subject was longer than `MAX_SUBJECT_CHARS` and `text` is its start: no pattern may allow it. */
  complete: boolean
  /** For a subject that is not complete, the SHA-256 (hex) of the whole of it: what tells two subjects with the same start apart. */
  wholeDigest?: string
  kind: ApprovalKind
  /** A command's simple commands, when the subject is a command. */
  segments?: readonly CommandSegment[]
}

export interface CommandSegment {
  text: string
  /**
   * Made only of what the reading understands completely (see the README): literal words,
   * quotes, `$NAME` and the few special parameters, and a command word that is no builtin
   * of the shell other than `echo`, `cd`, `pwd`, `true` and `false`. What a wildcard allow
   * rule may match; anything else must be allowed by an exact rule or a bare tool name, or
   * be asked.
   */
  plain: boolean
}

/**
 * The longest subject read whole. A longer one is cut here and marked incomplete: a rule's
 * pattern can then never allow it (what it cannot see it cannot allow), only ask or deny.
 */
export const MAX_SUBJECT_CHARS = 256 * 1024

const PATH_KEYS = ['path', 'file_path', 'filePath', 'file'] as const

/** The subject of `tool`'s call with `args`. */
export function subjectOf(args: unknown): CallSubject {
  if (typeof args === 'object' && args !== null && !Array.isArray(args)) {
    const record = args as Record<string, unknown>
    const command = record.command
    if (typeof command === 'string') return commandSubject(command)
    if (Array.isArray(command) && command.every((part) => typeof part === 'string')) return commandSubject(command.join(' '))
    for (const key of PATH_KEYS) {
      const path = record[key]
      // Normalised, so `src/../../x` is matched as the `../x` it is, not as a path under `src/`.
      if (typeof path === 'string') return cut(path.includes('..') || path.includes('//') || path.includes('/./') ? normalize(path) : path, 'edit')
    }
  }
  let json: string
  try {
    json = JSON.stringify(args) ?? String(args)
  } catch {
    json = '(arguments that cannot be shown)'
  }
  return cut(json, 'other')
}

const readings = new WeakMap<CallSubject, CommandReading>()

/** The reading of a command subject (`undefined` for any other subject), made once when the subject is. */
export function readingOf(subject: CallSubject): CommandReading | undefined {
  return readings.get(subject)
}

function commandSubject(command: string): CallSubject {
  const subject = cut(command, 'execute')
  const reading = readCommand(subject.text)
  const read: CallSubject = { ...subject, segments: reading.top.map(({ text, plain }) => ({ text, plain })) }
  readings.set(read, reading)
  return read
}

function cut(text: string, kind: ApprovalKind): CallSubject {
  if (text.length <= MAX_SUBJECT_CHARS) return { text, complete: true, kind }
  return { text: text.slice(0, MAX_SUBJECT_CHARS), complete: false, kind, wholeDigest: sha256(text) }
}

/**
 * What identifies a subject whole, for remembering and replaying answers: the SHA-256 of
 * all of it, also of what lies past `MAX_SUBJECT_CHARS` (an answer for one command never
 * covers another that starts alike).
 */
export function subjectDigest(subject: CallSubject): string {
  return subject.wholeDigest ?? sha256(subject.text)
}

/**
 * The subject as a front-end and a recorder see it: whole when it is short; cut, and then
 * ending with the digest of the whole, so a recording's answer for one long command never
 * answers another that starts alike.
 */
export function shownSubject(subject: CallSubject, chars: number): string {
  if (subject.complete && subject.text.length <= chars) return subject.text
  const why = subject.complete ? `${subject.text.length} characters` : 'longer than dsh reads whole'
  return `${subject.text.slice(0, chars)} … (${why}; sha256 ${subjectDigest(subject)})`
}

function sha256(text: string): string {
  return createHash('sha256').update(text).digest('hex')
}

/**
 * A subject shortened for one line of display: each run of white space holding a newline
 * shown as ` ⏎ `, at most `chars`. Linear in `text` (a regular expression such as
 * `\s*\n\s*` is tried again from every white-space character of a long run of them, which
 * costs a minute for a command of 200 KiB of spaces), and it stops once the line is full.
 */
export function displaySubject(text: string, chars = 400): string {
  let flat = ''
  let at = 0
  while (at < text.length && flat.length <= chars) {
    const newline = text.indexOf('\n', at)
    if (newline === -1) {
      flat += text.slice(at, at + chars + 1 - flat.length)
      break
    }
    // Up to the newline, without the white space before it (only what can still be shown is copied).
    let end = newline
    while (end > at && WHITE_SPACE.test(text[end - 1]!)) end--
    flat += `${text.slice(at, Math.min(end, at + chars + 1 - flat.length))} ⏎ `
    at = newline + 1
    while (at < text.length && WHITE_SPACE.test(text[at]!)) at++
  }
  return flat.length > chars ? `${flat.slice(0, chars - 1)}…` : flat
}

const WHITE_SPACE = /\s/

/**
 * A command's simple commands, split at unquoted `;`, `&`, `|`, `&&`, `||` and newlines,
 * each plain or not (`readCommand`): a conservative reading, not a shell.
 */
export function commandSegments(command: string): CommandSegment[] {
  return readCommand(command).top.map(({ text, plain }) => ({ text, plain }))
}

/**
 * Every form of every simple command of `subject` a `deny` or `ask` rule is matched
 * against (`formsOfReading`), and whether something in it may run a command none of
 * them shows: so too a subject seen only in part.
 */
export function restrictiveForms(subject: CallSubject): RestrictiveForms {
  const reading = readingOf(subject)
  if (reading === undefined) return { forms: [], unsure: false }
  const found = formsOfReading(reading)
  return subject.complete ? found : { forms: found.forms, unsure: true }
}
