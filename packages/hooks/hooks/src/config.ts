/**
 * Claude Code's hooks format, read into dsh's shape. One format for every source (dsh's own
 * entry, `~/.claude/settings.json`, a project's settings when allowed):
 *
 *     { "PreToolUse": [{ "matcher": "Bash", "hooks": [{ "type": "command", "command": "…", "timeout": 60 }] }] }
 *
 * Whatever this slice does not run (an unknown event, a field it does not read, a hook type
 * other than `command`) is one note naming the file, never a silent drop; a matcher that is
 * not a valid pattern leaves its group out with a note (a guard that cannot match must say so).
 */

/** The events this package fires, by their Claude Code names. */
export const HOOK_EVENTS = ['PreToolUse', 'PostToolUse', 'UserPromptSubmit', 'Stop', 'SubagentStart', 'SubagentStop', 'SessionStart', 'SessionEnd'] as const
export type HookEvent = (typeof HOOK_EVENTS)[number]

/** Events whose matcher is read against a tool's name. */
const TOOL_EVENTS: ReadonlySet<HookEvent> = new Set(['PreToolUse', 'PostToolUse'])

/** Claude Code's default bound on a command hook, in seconds. */
export const DEFAULT_TIMEOUT_SECONDS = 60
/** The longest timeout a hook may have: a day, well inside what a Node timer holds. */
export const MAX_TIMEOUT_SECONDS = 86_400

export interface HookCommand {
  command: string
  timeoutMs: number
  /** Where it was configured, for every note about it: `the hooks entry`, `~/.claude/settings.json`. */
  from: string
}

export interface HookGroup {
  event: HookEvent
  /** The matcher as written (`undefined`, `''` and `*` match every tool). */
  matcher?: string
  /** The compiled matcher; `undefined` matches everything. */
  pattern?: RegExp
  hooks: HookCommand[]
}

const GROUP_FIELDS = new Set(['matcher', 'hooks'])
const HOOK_FIELDS = new Set(['type', 'command', 'timeout'])

/** The groups of one source's `hooks` object; every problem is a note naming `from`. */
export function readHooks(raw: unknown, from: string, note: (line: string) => void): HookGroup[] {
  if (raw === undefined || raw === null) return []
  if (typeof raw !== 'object' || Array.isArray(raw)) {
    note(`${from}: hooks must be an object of events; ignored`)
    return []
  }
  const groups: HookGroup[] = []
  for (const [event, list] of Object.entries(raw as Record<string, unknown>)) {
    if (!(HOOK_EVENTS as readonly string[]).includes(event)) {
      note(`${from}: hook event "${event}" is not run by dsh (it runs ${HOOK_EVENTS.join(', ')}); ignored`)
      continue
    }
    if (!Array.isArray(list)) {
      note(`${from}: hooks.${event} must be a list of { matcher, hooks }; ignored`)
      continue
    }
    for (const [index, entry] of list.entries()) {
      const group = readGroup(event as HookEvent, entry, `${from}: hooks.${event}[${index}]`, note)
      if (group) groups.push(group)
    }
  }
  return groups
}

function readGroup(event: HookEvent, entry: unknown, where: string, note: (line: string) => void): HookGroup | undefined {
  if (typeof entry !== 'object' || entry === null || Array.isArray(entry)) {
    note(`${where} must be an object { matcher, hooks }; ignored`)
    return undefined
  }
  const record = entry as Record<string, unknown>
  for (const field of Object.keys(record)) if (!GROUP_FIELDS.has(field)) note(`${where}: field "${field}" is not read by dsh`)
  const matcher = record.matcher
  if (matcher !== undefined && typeof matcher !== 'string') {
    note(`${where}: matcher must be a string; the group is left out`)
    return undefined
  }
  let pattern: RegExp | undefined
  if (matcher !== undefined && matcher !== '' && matcher !== '*') {
    if (!TOOL_EVENTS.has(event)) note(`${where}: matcher "${matcher}" is not read for ${event} (it names tools); the group runs for every ${event}`)
    else {
      try {
        pattern = new RegExp(`^(?:${matcher})$`)
      } catch (error) {
        note(`${where}: matcher "${matcher}" is not a valid pattern (${(error as Error).message}); the group is left out`)
        return undefined
      }
    }
  }
  if (!Array.isArray(record.hooks)) {
    note(`${where}: hooks must be a list of { type: command, command }; the group is left out`)
    return undefined
  }
  const hooks: HookCommand[] = []
  for (const [index, hook] of record.hooks.entries()) {
    const read = readCommand(hook, `${where}.hooks[${index}]`, note)
    if (read) hooks.push({ ...read, from: where.split(':')[0]! })
  }
  return hooks.length === 0 ? undefined : { event, ...(typeof matcher === 'string' && { matcher }), ...(pattern && { pattern }), hooks }
}

function readCommand(hook: unknown, where: string, note: (line: string) => void): Omit<HookCommand, 'from'> | undefined {
  if (typeof hook !== 'object' || hook === null || Array.isArray(hook)) {
    note(`${where} must be an object { type: command, command }; ignored`)
    return undefined
  }
  const record = hook as Record<string, unknown>
  if (record.type !== 'command') {
    note(`${where}: hook type ${JSON.stringify(record.type)} is not run by dsh (only "command"); ignored`)
    return undefined
  }
  if (typeof record.command !== 'string' || record.command.trim() === '') {
    note(`${where}: command must be a non-empty string; ignored`)
    return undefined
  }
  for (const field of Object.keys(record)) if (!HOOK_FIELDS.has(field)) note(`${where}: field "${field}" is not read by dsh`)
  let seconds = DEFAULT_TIMEOUT_SECONDS
  if (record.timeout !== undefined) {
    if (typeof record.timeout === 'number' && Number.isFinite(record.timeout) && record.timeout > 0 && record.timeout <= MAX_TIMEOUT_SECONDS) seconds = record.timeout
    else if (typeof record.timeout === 'number' && record.timeout > MAX_TIMEOUT_SECONDS) {
      // Past what a timer holds (2^31-1 ms) Node fires it at once: a guard would be stopped before it decided.
      seconds = MAX_TIMEOUT_SECONDS
      note(`${where}: timeout ${record.timeout} s is more than ${MAX_TIMEOUT_SECONDS} s (a day); ${MAX_TIMEOUT_SECONDS} is used`)
    } else note(`${where}: timeout must be a positive number of seconds; ${DEFAULT_TIMEOUT_SECONDS} is used`)
  }
  return { command: record.command, timeoutMs: Math.round(seconds * 1000) }
}

/**
 * Claude Code's tool names for dsh's tools: a matcher written for Claude Code (`Bash`,
 * `Edit|Write`) matches the dsh tool that does the same. dsh's own names match as they are.
 */
const CLAUDE_CODE_NAMES: Readonly<Record<string, string>> = {
  bash: 'Bash',
  read: 'Read',
  write: 'Write',
  edit: 'Edit',
  grep: 'Grep',
  glob: 'Glob',
  ls: 'LS',
}

/** Whether `group` is for a call of `tool` (dsh's name): the pattern matches it or its Claude Code name. */
export function matchesTool(group: HookGroup, tool: string): boolean {
  if (group.pattern === undefined) return true
  const claude = CLAUDE_CODE_NAMES[tool]
  return group.pattern.test(tool) || (claude !== undefined && group.pattern.test(claude))
}

/** A matcher piece that is one tool name, or one name's prefix followed by `.*`. */
const LITERAL_NAME = /^[A-Za-z0-9_-]{1,64}$/
const NAME_PREFIX = /^([A-Za-z0-9_-]{1,63})\.\*$/
/** A level's list holds at most this many rules (`@dsh/base`'s bound); past it every tool is named. */
const MAX_ASK_UP_RULES = 64

/**
 * The `PreToolUse` matchers as permission rules of tool names (`Bash|Edit` is `Bash`,
 * `Edit`; `mcp__github__.*` is `mcp__github__*`; anything else, or no matcher, `*`): the
 * `askUp` level children in other processes carry, so they ask up the tree for each call a
 * hook here may decide. Never narrower than the matchers (rules ignore case; wider only
 * asks up more, and the hooks here then find no match).
 */
export function askUpRules(groups: readonly HookGroup[]): string[] {
  const rules = new Set<string>()
  for (const group of groups) {
    if (group.event !== 'PreToolUse') continue
    if (group.pattern === undefined) return ['*']
    for (const piece of group.matcher!.split('|')) {
      const prefix = NAME_PREFIX.exec(piece)
      if (LITERAL_NAME.test(piece)) rules.add(piece)
      else if (prefix) rules.add(`${prefix[1]}*`)
      else return ['*']
    }
  }
  return rules.size > MAX_ASK_UP_RULES ? ['*'] : [...rules]
}
