/**
 * What `deny` and `ask` rules are matched against in a command: every simple command in it
 * (its own, and those inside substitutions, subshells and groups), each as written, with its
 * words unquoted and joined by single spaces (so a tab, quotes or a backslash in the command
 * word hide nothing), and again after each word that runs the rest as a command (variable
 * assignments, the keywords `!` `{` `then` `do` `else` `elif` `if` `while` `until` `time`,
 * and the commands of `RUNNERS` with their options), and with a command word that is a path
 * cut to its last part (`/bin/rm` as `rm`). The strings `eval`, `sh -c` / `bash -c` and
 * `env -S` run are read as commands too, and `find -exec`'s command.
 *
 * Where this reading cannot tell what runs (`unsure`: the command word is an expansion or a
 * glob, a runner's option is not one it knows, a builtin may evaluate its arguments as code,
 * or the command holds an expansion that can), a restrictive rule of the tool asks instead:
 * deny by default where unsure.
 */
import { readCommand, type CommandReading, type ReadSegment, type ReadWord } from './command-reader.js'
import { HARMLESS_BUILTINS, SHELL_WORDS } from './shell-words.js'

export interface RestrictiveForms {
  forms: string[]
  /** Something in the command may run a command none of `forms` shows. */
  unsure: boolean
}

/** How many runner words and keywords are stripped from one simple command; more, it is unsure. */
const MAX_STRIPS = 16
/** How deep strings run as commands (`bash -c "eval '…'"`) are read; deeper, unsure. */
const MAX_STRING_NESTING = 4

/** Keywords after which the next word is a command word. */
const PREFIX_KEYWORDS: ReadonlySet<string> = new Set(['!', '{', '}', 'then', 'do', 'else', 'elif', 'if', 'while', 'until'])

/** How a command that runs the rest of its words as a command takes its options. */
interface Runner {
  /** Single-letter options without a value. */
  flags?: string
  /** Single-letter options that take a value (attached or as the next word). */
  values?: string
  /** Long options (without `--`) that take a value as the next word when not given with `=`. */
  longValues?: readonly string[]
  /** Long options without a value. */
  longFlags?: readonly string[]
  /** Words that are not options before the command (timeout's duration). */
  operands?: number
  /** `NAME=value` words may come before the command (env, sudo). */
  assignments?: boolean
  /** `-N` (a number) is an option (nice). */
  numberOption?: boolean
}

/** Commands that run their remaining words as a command, with the options they take. */
export const RUNNERS: Readonly<Record<string, Runner>> = {
  command: { flags: 'pvV' },
  builtin: {},
  exec: { flags: 'cl', values: 'a' },
  time: { flags: 'pavq', values: 'fo', longFlags: ['portability', 'append', 'verbose', 'quiet'], longValues: ['format', 'output'] },
  nice: { values: 'n', longValues: ['adjustment'], numberOption: true },
  nohup: {},
  timeout: { flags: 'v', values: 'sk', longFlags: ['preserve-status', 'foreground', 'verbose'], longValues: ['signal', 'kill-after'], operands: 1 },
  sudo: { flags: 'AbEeHiKklnPSsVv', values: 'CDghpRrTtUu', longFlags: ['askpass', 'background', 'preserve-env', 'set-home', 'login', 'non-interactive', 'shell', 'stdin', 'reset-timestamp', 'remove-timestamp'], longValues: ['close-from', 'chdir', 'group', 'host', 'prompt', 'chroot', 'role', 'type', 'command-timeout', 'other-user', 'user'], assignments: true },
  doas: { flags: 'Lns', values: 'Cu' },
  env: { flags: 'i0v', values: 'uC', longFlags: ['ignore-environment', 'null', 'debug'], longValues: ['unset', 'chdir'], assignments: true },
  xargs: { flags: '0oprtx', values: 'adEILnPs', longFlags: ['null', 'interactive', 'no-run-if-empty', 'verbose', 'exit', 'open-tty'], longValues: ['arg-file', 'delimiter', 'max-lines', 'max-args', 'max-procs', 'max-chars', 'process-slot-var', 'eof', 'replace'] },
  stdbuf: { values: 'ioe', longValues: ['input', 'output', 'error'] },
  setsid: { flags: 'cfw', longFlags: ['ctty', 'fork', 'wait'] },
  ionice: { flags: 't', values: 'cnp', longFlags: ['ignore'], longValues: ['class', 'classdata', 'pid'] },
}

/** Shells whose `-c` string is a command. */
const SHELLS: ReadonlySet<string> = new Set(['sh', 'bash', 'dash', 'zsh', 'ksh', 'mksh', 'ash'])

/** Builtins that evaluate their arguments (or what variables hold) as code or arithmetic whatever they look like. */
const EVALUATING: ReadonlySet<string> = new Set([
  'let', 'declare', 'typeset', 'local', 'readonly', 'alias', 'trap', 'enable', 'bind', 'fc', 'history', 'complete', 'compgen', 'compopt',
  'mapfile', 'readarray', 'coproc', 'function', 'select', 'case', '[[', 'source', '.',
])

/** Builtins and keywords that take numbers or nothing, and never evaluate what their arguments hold. */
const NEVER_EVALUATING: ReadonlySet<string> = new Set([':', 'for', 'in', 'done', 'fi', 'esac', 'exit', 'return', 'break', 'continue', 'shift'])

/** Every restrictive form of every simple command of `reading`. */
export function formsOfReading(reading: CommandReading, nesting = 0): RestrictiveForms {
  const forms: string[] = []
  let unsure = reading.broken
  for (const segment of reading.all) {
    if (segment.unsure) unsure = true
    if (formsOfSegment(segment, forms, nesting)) unsure = true
  }
  return { forms, unsure }
}

/** Adds `segment`'s forms to `forms`; true when it is unsure what the segment runs. */
function formsOfSegment(segment: ReadSegment, forms: string[], nesting: number): boolean {
  const { words } = segment
  forms.push(segment.text)
  const add = (from: number) => {
    if (from < words.length) forms.push(joinWords(words, from))
  }
  add(0)
  let at = 0
  for (let strips = 0; ; strips++) {
    if (strips > MAX_STRIPS) return true
    const before = at
    while (at < words.length && words[at]!.assignment) at++
    const word = words[at]
    if (word === undefined) return false
    if (!word.literal || word.glob) return true
    const name = baseName(word.value)
    if (PREFIX_KEYWORDS.has(word.value)) at++
    else if (RUNNERS[name] !== undefined) {
      const after = skipOptions(words, at + 1, RUNNERS[name]!)
      if (after === undefined) return true
      at = after
      // xargs adds the words it reads to the command: `xargs rm` runs `rm` with arguments.
      if (name === 'xargs' && at < words.length) forms.push(`${joinWords(words, at)} …`)
    } else {
      if (before !== at) add(at)
      return commandForms(words, at, forms, nesting)
    }
    add(at)
  }
}

/** The forms of the command whose command word is `words[at]` (literal): its base name, and what it runs as a string. */
function commandForms(words: ReadWord[], at: number, forms: string[], nesting: number): boolean {
  const word = words[at]!.value
  const name = baseName(word)
  if (name !== word) forms.push([name, ...words.slice(at + 1).map((entry) => entry.value)].join(' '))
  const rest = words.slice(at + 1)
  if (name === 'eval') return stringForms(rest, forms, nesting)
  if (SHELLS.has(name)) {
    const string = shellString(rest)
    return string === undefined ? false : string === null ? true : stringForms([string], forms, nesting)
  }
  if (name === 'find') return findExecForms(words, at, forms)
  if (EVALUATING.has(name)) return true
  // Any other builtin evaluates its arguments only through what they hold: unsure where they hold an expansion or a subscript.
  if (SHELL_WORDS.has(name) && !HARMLESS_BUILTINS.has(name) && !NEVER_EVALUATING.has(name) && rest.some((entry) => !entry.literal || /[[`$]/.test(entry.value))) return true
  return false
}

/** The forms of `words` (all literal) joined and read as a command. */
function stringForms(words: readonly ReadWord[], forms: string[], nesting: number): boolean {
  if (words.length === 0) return false
  if (nesting >= MAX_STRING_NESTING || words.some((entry) => !entry.literal)) return true
  const found = formsOfReading(readCommand(words.map((entry) => entry.value).join(' ')), nesting + 1)
  forms.push(...found.forms)
  return found.unsure
}

/** A shell's `-c` string: `undefined` when it is not given `-c`, `null` when the string cannot be told. */
function shellString(words: readonly ReadWord[]): ReadWord | undefined | null {
  let command = false
  for (let index = 0; index < words.length; index++) {
    const word = words[index]!
    if (!word.literal) return command ? null : undefined
    if (word.value === '--' || !(word.value.startsWith('-') || word.value.startsWith('+'))) return command ? word : undefined
    if (word.value.startsWith('--')) continue
    if (word.value.includes('c')) command = true
    // `-o option` and `-O option` take the next word.
    if (/[oO]$/.test(word.value)) index++
  }
  return command ? null : undefined
}

/** `find … -exec CMD … ;` (and `-execdir`, `-ok`, `-okdir`): the command it runs. */
function findExecForms(words: ReadWord[], at: number, forms: string[]): boolean {
  let unsure = false
  for (let index = at + 1; index < words.length; index++) {
    const value = words[index]!.value
    if (value !== '-exec' && value !== '-execdir' && value !== '-ok' && value !== '-okdir') continue
    let end = index + 1
    while (end < words.length && words[end]!.value !== ';' && words[end]!.value !== '+') end++
    const inner = words.slice(index + 1, end)
    if (inner.length > 0) {
      if (!inner[0]!.literal || inner[0]!.glob) unsure = true
      else forms.push(joinWords(inner, 0), [baseName(inner[0]!.value), ...inner.slice(1).map((entry) => entry.value)].join(' '))
    }
    index = end
  }
  return unsure
}

/** The index of the first word after a runner's options and operands, or `undefined` for an option it does not know. */
function skipOptions(words: readonly ReadWord[], at: number, runner: Runner): number | undefined {
  let operands = runner.operands ?? 0
  for (; at < words.length; at++) {
    const word = words[at]!
    if (!word.literal) return undefined
    const value = word.value
    if (value === '--') return at + 1
    if (runner.assignments && word.assignment) continue
    if (value.startsWith('--')) {
      const [name, given] = [value.slice(2).split('=')[0]!, value.includes('=')]
      if (runner.longFlags?.includes(name)) continue
      if (runner.longValues?.includes(name)) {
        if (!given) at++
        continue
      }
      return undefined
    }
    if (value.startsWith('-') && value.length > 1) {
      if (runner.numberOption && /^-[0-9]+$/.test(value)) continue
      if (value === '-' && runner.assignments) continue
      const valued = shortOptions(value.slice(1), runner)
      if (valued === undefined) return undefined
      if (valued) at++
      continue
    }
    if (value === '-' && runner.assignments) continue
    if (operands > 0) {
      operands--
      continue
    }
    return at
  }
  return at
}

/** Whether a cluster of short options ends in one that takes the next word as its value; `undefined` for a letter the runner does not take. */
function shortOptions(cluster: string, runner: Runner): boolean | undefined {
  for (let index = 0; index < cluster.length; index++) {
    const letter = cluster[index]!
    if (runner.values?.includes(letter)) return index === cluster.length - 1
    if (!runner.flags?.includes(letter)) return undefined
  }
  return false
}

function joinWords(words: readonly ReadWord[], from: number): string {
  let text = ''
  for (let index = from; index < words.length; index++) text += index === from ? words[index]!.value : ` ${words[index]!.value}`
  return text
}

function baseName(word: string): string {
  const slash = word.lastIndexOf('/')
  return slash === -1 || slash === word.length - 1 ? word : word.slice(slash + 1)
}
