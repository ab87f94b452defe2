/**
 * What a side effect is about, as rules and people see it: the *subject* of a call (a
 * command for a tool that runs one, a path for one that writes a file, the arguments as
 * compact JSON otherwise), and, for a command, its simple commands, so a rule that allows
 * `npm test*` never allows `npm test && rm -rf ~` by accident.
 */

/** How a call is classed for a front-end (ACP's tool kinds use the same words). */
export type ApprovalKind = 'execute' | 'edit' | 'other'

export interface CallSubject {
  /** The full subject rules match against. */
  text: string
  kind: ApprovalKind
  /** A command's simple commands, when the subject is a command. */
  segments?: readonly CommandSegment[]
}

export interface CommandSegment {
  text: string
  /**
   * No substitution (`$(…)`, backquotes, `<(…)`) and no redirection (`>`, `<`) outside
   * single quotes: what a wildcard allow rule may match. Anything else must be allowed by
   * an exact rule or a bare tool name, or be asked.
   */
  plain: boolean
}

/** The longest subject kept: rules see this much of a call, and front-ends shorten it further for display. */
export const MAX_SUBJECT_CHARS = 8192

const PATH_KEYS = ['path', 'file_path', 'filePath', 'file'] as const

/** The subject of `tool`'s call with `args`. */
export function subjectOf(args: unknown): CallSubject {
  if (typeof args === 'object' && args !== null && !Array.isArray(args)) {
    const record = args as Record<string, unknown>
    const command = record.command
    if (typeof command === 'string') return { text: command.slice(0, MAX_SUBJECT_CHARS), kind: 'execute', segments: commandSegments(command.slice(0, MAX_SUBJECT_CHARS)) }
    if (Array.isArray(command) && command.every((part) => typeof part === 'string')) {
      const joined = command.join(' ').slice(0, MAX_SUBJECT_CHARS)
      return { text: joined, kind: 'execute', segments: commandSegments(joined) }
    }
    for (const key of PATH_KEYS) {
      const path = record[key]
      if (typeof path === 'string') return { text: path.slice(0, MAX_SUBJECT_CHARS), kind: 'edit' }
    }
  }
  let json: string
  try {
    json = JSON.stringify(args) ?? String(args)
  } catch {
    json = '(arguments that cannot be shown)'
  }
  return { text: json.slice(0, MAX_SUBJECT_CHARS), kind: 'other' }
}

/** A subject shortened for one line of display: newlines shown as ⏎, at most `chars`. */
export function displaySubject(text: string, chars = 400): string {
  const flat = text.replace(/\s*\n\s*/g, ' ⏎ ')
  return flat.length > chars ? `${flat.slice(0, chars - 1)}…` : flat
}

/**
 * Split a shell command into its simple commands at unquoted `;`, `&`, `|`, `&&`, `||`
 * and newlines. Quotes and backslashes are honoured as a POSIX shell would for where a
 * command ends; this is a conservative reading, not a shell: anything it cannot be sure
 * of makes the segment not plain, so it is asked rather than allowed.
 */
export function commandSegments(command: string): CommandSegment[] {
  const segments: CommandSegment[] = []
  let current = ''
  let plain = true
  let quote: "'" | '"' | undefined
  const push = () => {
    const text = current.trim()
    if (text !== '') segments.push({ text, plain })
    current = ''
    plain = true
  }
  for (let index = 0; index < command.length; index++) {
    const char = command[index]!
    const next = command[index + 1]
    if (quote === "'") {
      current += char
      if (char === "'") quote = undefined
      continue
    }
    if (char === '\\') {
      current += char + (next ?? '')
      index++
      continue
    }
    if (quote === '"') {
      current += char
      if (char === '"') quote = undefined
      // Substitutions run inside double quotes too.
      else if (char === '`' || (char === '$' && next === '(')) plain = false
      continue
    }
    if (char === "'" || char === '"') {
      quote = char
      current += char
      continue
    }
    if (char === '`' || (char === '$' && next === '(') || ((char === '<' || char === '>') && next === '(')) {
      plain = false
      current += char
      continue
    }
    if (char === '>' || char === '<') {
      plain = false
      current += char
      continue
    }
    if (char === ';' || char === '\n' || char === '&' || char === '|') {
      push()
      // `&&`, `||`, `|&`, `;;`: one separator.
      if ((char === '&' || char === '|' || char === ';') && (next === '&' || next === '|' || next === ';')) index++
      continue
    }
    current += char
  }
  // An unclosed quote: the shell would refuse it or read on; never a plain command.
  if (quote !== undefined) plain = false
  push()
  return segments
}
