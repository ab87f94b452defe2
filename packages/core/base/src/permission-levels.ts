/**
 * Permission levels, and the one check of their rules wherever they come from: a config
 * file, an agent definition, a session header read back, or a peer's lineage (never
 * trusted). `@dsh/approvals` compiles what passes here; the grammar is
 * written once, here, so a level any of them accepts is a level all of them accept.
 */
import { isRecord } from './guards.js'

/**
 * One level of permission rules: the rules of one configuration or one agent definition.
 * Each rule is a tool name (`bash`, `*` for every tool) or a tool name with a pattern of
 * its subject (`bash(npm test*)`: `*` matches anything). An agent is under every level of
 * its ancestors as well as its own, and the most restrictive verdict wins (see
 * `@dsh/approvals`): a level can narrow what the levels above it allow, never widen it.
 */
export interface PermissionLevel {
  /** Where the rules come from, for messages: `config`, `helper reviewer`. */
  from: string
  allow?: readonly string[]
  ask?: readonly string[]
  deny?: readonly string[]
  /**
   * Calls an ancestor decides itself before anyone is asked (its `PreToolUse` hooks, through
   * `@dsh/approvals`' verdict sources): a descendant in another process asks up the tree for
   * each, even where its rules would allow it. Never a verdict of its own: it only narrows.
   */
  askUp?: readonly string[]
}

/**
 * A rule: `tool` or `tool(pattern)`; a tool name is letters, digits, `_`, `-`, `.`, or `*` for
 * every tool, or such a name ending in `*` for every tool whose name starts so (`mcp__github__*`:
 * the tools of one MCP server).
 */
export const PERMISSION_RULE = /^([A-Za-z0-9_.-]{1,64}\*?|\*)(?:\((.*)\))?$/s

/**
 * Whether a rule's tool part (`PERMISSION_RULE`'s first group) names the tool `tool`, in any
 * case: `*` every tool; a name ending in `*` every tool that starts so; `mcp__<server>` alone
 * (Claude Code's form, a name with no `__` after `mcp__`) every tool of that MCP server, as
 * `mcp__<server>__*` does; any other name that tool only. The one reading of it: the broker's
 * rules and the MCP client's check of read-only hints use it alike.
 */
export function ruleToolMatches(ruleTool: string, tool: string): boolean {
  const rule = ruleTool.toLowerCase()
  const name = tool.toLowerCase()
  if (rule === '*' || rule === name) return true
  if (rule.endsWith('*')) return name.startsWith(rule.slice(0, -1))
  return isMcpServerRule(rule) && name.startsWith(`${rule}__`)
}

/** `mcp__<server>` with no tool after it. */
function isMcpServerRule(rule: string): boolean {
  return rule.startsWith('mcp__') && rule.length > 5 && !rule.slice(5).includes('__')
}

/** Bounds that keep a header or a lineage small: a peer cannot make a child carry megabytes of rules. */
export const PERMISSION_BOUNDS = { levels: 32, rulesPerList: 64, ruleChars: 512, fromChars: 120 } as const

export const PERMISSION_LISTS = ['allow', 'ask', 'deny', 'askUp'] as const satisfies readonly (keyof PermissionLevel)[]

/** What is wrong with one rule, or `undefined`. */
export function permissionRuleProblem(rule: unknown): string | undefined {
  if (typeof rule !== 'string') return 'a rule must be text, e.g. "bash" or "bash(npm test*)"'
  if (rule.length > PERMISSION_BOUNDS.ruleChars) return `a rule is longer than ${PERMISSION_BOUNDS.ruleChars} characters`
  if (/[\u0000-\u0008\u000b-\u001f\u007f]/.test(rule)) return `the rule ${JSON.stringify(rule.slice(0, 60))} has control characters`
  const match = PERMISSION_RULE.exec(rule)
  if (!match) return `${JSON.stringify(rule.slice(0, 60))} is not a rule: write a tool name ("bash", "*" for every tool), optionally with a pattern of its subject in parentheses ("bash(npm test*)")`
  if (match[2] !== undefined && match[2].trim() === '') return `the rule ${JSON.stringify(rule)} has an empty pattern; leave out the parentheses to mean every call of ${match[1]}`
  return undefined
}

/** What is wrong with one level's lists (`where` names it in the message), or `undefined`. */
export function permissionLevelProblem(level: unknown, where: string): string | undefined {
  if (!isRecord(level)) return `${where} must be an object with allow, ask and/or deny lists`
  if (typeof level.from !== 'string' || level.from === '' || level.from.length > PERMISSION_BOUNDS.fromChars) return `${where}.from must be a short non-empty text`
  for (const key of Object.keys(level)) {
    if (key !== 'from' && !(PERMISSION_LISTS as readonly string[]).includes(key)) return `${where} has an unknown key ${JSON.stringify(key.slice(0, 40))} (${PERMISSION_LISTS.join(', ')})`
  }
  for (const list of PERMISSION_LISTS) {
    const rules = level[list]
    if (rules === undefined) continue
    if (!Array.isArray(rules)) return `${where}.${list} must be a list of rules`
    if (rules.length > PERMISSION_BOUNDS.rulesPerList) return `${where}.${list} has more than ${PERMISSION_BOUNDS.rulesPerList} rules`
    for (const [index, rule] of rules.entries()) {
      const problem = permissionRuleProblem(rule)
      if (problem) return `${where}.${list}[${index}]: ${problem}`
    }
  }
  return undefined
}

/** What is wrong with a list of levels (`where` names it), or `undefined`. */
export function permissionLevelsProblem(levels: unknown, where: string): string | undefined {
  if (!Array.isArray(levels)) return `${where} must be a list of permission levels`
  if (levels.length > PERMISSION_BOUNDS.levels) return `${where} has more than ${PERMISSION_BOUNDS.levels} levels`
  for (const [index, level] of levels.entries()) {
    const problem = permissionLevelProblem(level, `${where}[${index}]`)
    if (problem) return problem
  }
  return undefined
}

/** A level with only its known keys, copied (what a checked value becomes). */
export function cleanPermissionLevel(level: PermissionLevel): PermissionLevel {
  const clean: PermissionLevel = { from: level.from }
  for (const list of PERMISSION_LISTS) if (level[list] !== undefined && level[list].length > 0) clean[list] = [...level[list]]
  return clean
}

/** Whether a level has no rule at all (it changes no verdict). */
export function isEmptyPermissionLevel(level: PermissionLevel): boolean {
  return PERMISSION_LISTS.every((list) => (level[list]?.length ?? 0) === 0)
}

/**
 * `inherited` then `added`, leaving out empty levels and a level already present with the
 * same rules (the same configuration met again down a chain decides nothing new). Never
 * cut: a level left out could widen what a child may do, so a chain with more distinct
 * levels than `PERMISSION_BOUNDS.levels` is refused where it crosses a wire instead.
 */
export function joinPermissionLevels(inherited: readonly PermissionLevel[] | undefined, added: readonly PermissionLevel[] | undefined): PermissionLevel[] | undefined {
  if ((inherited === undefined || inherited.length === 0) && (added === undefined || added.length === 0)) return undefined
  const joined: PermissionLevel[] = []
  const seen = new Set<string>()
  for (const level of [...(inherited ?? []), ...(added ?? [])]) {
    if (isEmptyPermissionLevel(level)) continue
    const key = JSON.stringify(PERMISSION_LISTS.map((list) => level[list] ?? []))
    if (seen.has(key)) continue
    seen.add(key)
    joined.push(level)
  }
  if (joined.length === 0) return undefined
  return joined
}
