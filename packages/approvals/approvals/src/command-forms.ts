/**
 * What `deny` and `ask` rules are matched against in a command: every simple command in it
 * (its own, and those inside substitutions, subshells and groups), each as written, with its
 * words unquoted and joined by single spaces (so a tab, quotes or a backslash in the command
 * word hide nothing), and again after each word that runs the rest as a command (variable
 * assignments, the keywords `!` `{` `then` `do` `else` `elif` `if` `while` `until` `time`,
 * and the commands of `RUNNERS` with their options), and with a command word that is a path
 * cut to its last part (`/bin/rm` as `rm`). The strings `eval` and `sh -c` / `bash -c` run
 * are read as commands too, and each command `find -exec` runs, as a command of its own.
 *
 * Where this reading cannot tell what runs (`unsure`: the command word is an expansion or a
 * glob, a runner's option is not one it knows, a shell reads a script or its input, a
 * command of `OPAQUE_RUNNERS` runs something, a builtin may evaluate its arguments as code,
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
  /** Single-letter options whose value, if any, is the rest of their word (xargs' `-i[R]`): they never take the next word. */
  optionalValues?: string
  /** Without a command it runs a shell, which reads commands from its input (`sudo -s`, `chroot DIR`): unsure. */
  emptyRunsShell?: boolean
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
  sudo: { emptyRunsShell: true, flags: 'AbEeHiKklnPSsVv', values: 'CDghpRrTtUu', longFlags: ['askpass', 'background', 'preserve-env', 'set-home', 'login', 'non-interactive', 'shell', 'stdin', 'reset-timestamp', 'remove-timestamp'], longValues: ['close-from', 'chdir', 'group', 'host', 'prompt', 'chroot', 'role', 'type', 'command-timeout', 'other-user', 'user'], assignments: true },
  doas: { flags: 'Lns', values: 'Cu', emptyRunsShell: true },
  env: { flags: 'i0v', values: 'uC', longFlags: ['ignore-environment', 'null', 'debug'], longValues: ['unset', 'chdir'], assignments: true },
  // `--eof`, `--replace` and `--max-lines` take a value only after `=`: `xargs --replace rm {}` runs rm.
  xargs: { flags: '0oprtx', values: 'adEILnPs', optionalValues: 'eil', longFlags: ['null', 'interactive', 'no-run-if-empty', 'verbose', 'exit', 'open-tty', 'eof', 'replace', 'max-lines'], longValues: ['arg-file', 'delimiter', 'max-args', 'max-procs', 'max-chars', 'process-slot-var'] },
  stdbuf: { values: 'ioe', longValues: ['input', 'output', 'error'] },
  setsid: { flags: 'cfw', longFlags: ['ctty', 'fork', 'wait'] },
  ionice: { flags: 't', values: 'cnp', longFlags: ['ignore'], longValues: ['class', 'classdata', 'pid'] },
  // The applet named next (`busybox rm`, `busybox sh`); any option of its own is unsure.
  busybox: {},
  toybox: {},
  // `flock FILE -c STRING` runs a string through sh: `-c` is an option the reading does not take, so unsure.
  flock: { flags: 'sexunoF', values: 'wE', longFlags: ['shared', 'exclusive', 'unlock', 'nonblock', 'nb', 'close', 'no-fork', 'verbose'], longValues: ['timeout', 'wait', 'conflict-exit-code'], operands: 1 },
  chroot: { longFlags: ['skip-chdir'], longValues: ['groups', 'userspec'], operands: 1, emptyRunsShell: true },
  taskset: { flags: 'acp', longFlags: ['all-tasks', 'cpu-list', 'pid'], operands: 1 },
  chrt: { flags: 'abdfiomprRv', values: 'TPD', longFlags: ['all-tasks', 'batch', 'deadline', 'fifo', 'idle', 'other', 'rr', 'max', 'pid', 'reset-on-fork', 'verbose'], longValues: ['sched-runtime', 'sched-period', 'sched-deadline'], operands: 1 },
}

/**
 * Commands that run commands in ways this reading does not follow: shells of another
 * language, commands that hand a string to a shell, another user's login shell, another
 * machine, a job scheduler, or run a command under options too many to read. Any use of one
 * is unsure.
 */
export const OPAQUE_RUNNERS: ReadonlySet<string> = new Set([
  'fish', 'csh', 'tcsh', 'pwsh', 'nu', 'xonsh', 'elvish',
  'su', 'sg', 'newgrp', 'runuser', 'pkexec', 'script', 'watch', 'parallel', 'ssh', 'at', 'batch', 'systemd-run', 'tmux', 'screen',
  'strace', 'ltrace', 'firejail', 'nsenter', 'setpriv', 'unshare', 'bwrap', 'prlimit', 'numactl',
  'ssh-agent', 'dbus-run-session', 'xvfb-run', 'fakeroot', 'proot', 'faketime', 'valgrind', 'gdb', 'cgexec', 'sudoedit', 'chpst', 'catchsegv',
])

/**
 * Variables whose value bash or the commands it starts run as code, or that change which
 * program a name runs (`PS4='$(…)'; set -x`, `BASH_ENV=<(…) bash -c :`, `PATH=.`): an
 * assignment to one, or any assignment whose value holds an expansion, is unsure.
 */
const CODE_VARIABLES = /^(?:PS[0-4]|PROMPT_COMMAND|BASH_ENV|ENV|PATH|IFS|SHELLOPTS|BASHOPTS|EXECIGNORE|BASH_\w+|LD_\w+|GIT_\w+|\w*_COMMAND|\w*ASKPASS|\w*EDITOR|\w*PAGER|NODE_OPTIONS|PYTHON\w*|PERL\w*|RUBY\w*)\+?=/

/** Shells whose `-c` string is a command in the language this reading follows; without `-c` they read a script file or their input. */
export const SHELLS: ReadonlySet<string> = new Set(['sh', 'bash', 'rbash', 'dash', 'zsh', 'ksh', 'ksh93', 'mksh', 'pdksh', 'oksh', 'ash', 'hush', 'yash', 'posh'])

/** A shell's long options that take the next word as their value (bash's). */
const SHELL_LONG_VALUES: ReadonlySet<string> = new Set(['rcfile', 'init-file'])
/** A shell's long options without a value (bash's); any other long option is unsure. */
const SHELL_LONG_FLAGS: ReadonlySet<string> = new Set(['norc', 'noprofile', 'login', 'posix', 'restricted', 'verbose', 'noediting'])

/** find's actions that run a command, up to `;` (or `{} +`). */
const FIND_RUNNING: ReadonlySet<string> = new Set(['-exec', '-execdir', '-ok', '-okdir'])

/** Builtins that evaluate their arguments (or what variables hold) as code or arithmetic whatever they look like. */
const EVALUATING: ReadonlySet<string> = new Set([
  'let', 'declare', 'typeset', 'local', 'readonly', 'alias', 'trap', 'enable', 'bind', 'fc', 'history', 'complete', 'compgen', 'compopt',
  'mapfile', 'readarray', 'coproc', 'function', 'select', 'case', '[[', 'source', '.',
  // `hash -p /bin/rm del` makes `del` run rm; `shopt` changes how later words are read.
  'hash', 'shopt',
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
  forms.push(segment.text)
  return formsOfWords(segment.words, forms, nesting)
}

/** Adds the forms of the command `words` make (a simple command's, or what `find -exec` runs); true when unsure. */
function formsOfWords(words: readonly ReadWord[], forms: string[], nesting: number): boolean {
  const add = (from: number) => {
    if (from < words.length) forms.push(joinWords(words, from))
  }
  add(0)
  let at = 0
  for (let strips = 0; ; strips++) {
    if (strips > MAX_STRIPS) return true
    const before = at
    while (at < words.length && words[at]!.assignment) {
      if (!words[at]!.literal || CODE_VARIABLES.test(words[at]!.value)) return true
      at++
    }
    const word = words[at]
    if (word === undefined) return false
    if (!word.literal || word.glob) return true
    const name = baseName(word.value)
    if (PREFIX_KEYWORDS.has(word.value)) at++
    else if (RUNNERS[name] !== undefined) {
      const runner = RUNNERS[name]!
      const after = skipOptions(words, at + 1, runner)
      if (after === undefined) return true
      if (after >= words.length && runner.emptyRunsShell) return true
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
function commandForms(words: readonly ReadWord[], at: number, forms: string[], nesting: number): boolean {
  const word = words[at]!.value
  const name = baseName(word)
  if (name !== word) forms.push([name, ...words.slice(at + 1).map((entry) => entry.value)].join(' '))
  const rest = words.slice(at + 1)
  if (name === 'eval') return stringForms(rest, forms, nesting)
  if (SHELLS.has(name)) {
    const { script, unsure } = shellScript(rest)
    const scriptUnsure = script !== undefined && stringForms([script], forms, nesting)
    return unsure || scriptUnsure
  }
  if (OPAQUE_RUNNERS.has(name)) return true
  if (name === 'find') return findExecForms(words, at, forms, nesting)
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

/**
 * A shell's `-c` string (`script`), and whether the shell may run anything else (`unsure`):
 * without `-c` it runs a script file or reads commands from its input; an expansion could be
 * any option; a long option it does not know could take the next word. `-o` / `-O` take one
 * word each (`-eOc extglob 'cmd'`), `--rcfile` / `--init-file` theirs, and `--` or `-` ends
 * the options.
 */
function shellScript(words: readonly ReadWord[]): { script?: ReadWord; unsure: boolean } {
  let command = false
  let unsure = false
  let index = 0
  for (; index < words.length; index++) {
    const word = words[index]!
    if (!word.literal) return { unsure: true }
    const value = word.value
    if (value === '--' || value === '-') {
      index++
      break
    }
    if (value.startsWith('--')) {
      const option = value.slice(2)
      if (SHELL_LONG_VALUES.has(option)) index++
      else if (!SHELL_LONG_FLAGS.has(option)) unsure = true
      continue
    }
    if (!(value.startsWith('-') || value.startsWith('+'))) break
    const letters = value.slice(1)
    if (letters.includes('c')) command = true
    for (const letter of letters) if (letter === 'o' || letter === 'O') index++
  }
  if (!command) return { unsure: true }
  const script = words[index]
  return script === undefined ? { unsure } : { script, unsure }
}

/**
 * `find … -exec CMD … ;` (and `-execdir`, `-ok`, `-okdir`; `{} +` ends one too): each command
 * it runs, read as a command of its own (runners, shells' strings). Unsure where a word of
 * find's is an expansion (it could be `-exec`) or the command word holds `{}` (find runs the
 * files it finds).
 */
function findExecForms(words: readonly ReadWord[], at: number, forms: string[], nesting: number): boolean {
  let unsure = false
  for (let index = at + 1; index < words.length; index++) {
    const word = words[index]!
    if (!word.literal) unsure = true
    if (!FIND_RUNNING.has(word.value)) continue
    let end = index + 1
    while (end < words.length && words[end]!.value !== ';' && !(words[end]!.value === '+' && words[end - 1]!.value === '{}')) end++
    const inner = words.slice(index + 1, end)
    if (inner[0]?.value.includes('{}')) unsure = true
    else if (formsOfWords(inner, forms, nesting)) unsure = true
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
    if (runner.assignments && word.assignment) {
      if (!word.literal || CODE_VARIABLES.test(word.value)) return undefined
      continue
    }
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
    if (runner.optionalValues?.includes(letter)) return false
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
