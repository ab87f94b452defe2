/**
 * The policy: permission levels compiled into matchers, and the verdict of a list of
 * levels on one call. Within a level, a matching `deny` rule wins over `ask`, and `ask`
 * over `allow`. Across levels (an agent is under its process's configuration, every
 * ancestor's definition and its own), the most restrictive verdict wins: `deny` anywhere
 * denies, else `ask` anywhere asks, else `allow` anywhere allows, else no level has an
 * opinion and the broker's default applies. A level can therefore narrow what the levels
 * above it allow, and never widen what they deny or ask about.
 */
import { PERMISSION_LISTS, PERMISSION_RULE, permissionLevelProblem, type PermissionLevel } from '@dsh/session'
import { ruleToolMatches } from '@dsh/base'
import type { RestrictiveForms } from './command-forms.js'
import { restrictiveForms, type CallSubject, type CommandSegment } from './subject.js'

export type Verdict = 'allow' | 'ask' | 'deny'

/** What the policy says of one call, and which rule of which level said it. */
export interface PolicyVerdict {
  verdict: Verdict | undefined
  /** `bash(npm test*) (config)`: the deciding rule and where it comes from. */
  rule?: string
}

interface CompiledRule {
  text: string
  /** Lower case, or `*`. */
  tool: string
  /** The pattern's text between its `*`s; absent: every call of the tool. */
  pattern?: GlobPattern
  /** The pattern has no `*`: it names one subject exactly. */
  exact: boolean
}

export interface CompiledLevel {
  from: string
  allow: readonly CompiledRule[]
  ask: readonly CompiledRule[]
  deny: readonly CompiledRule[]
}

/** What a call is, for matching. */
export interface PolicyCall {
  tool: string
  subject: CallSubject
}

const compiledLevels = new WeakMap<PermissionLevel, CompiledLevel>()

/** Compile one level (checked first: a level read from anywhere passes `permissionLevelProblem`). Cached per level object. */
export function compileLevel(level: PermissionLevel): CompiledLevel {
  const cached = compiledLevels.get(level)
  if (cached) return cached
  const problem = permissionLevelProblem(level, 'a permission level')
  if (problem) throw new TypeError(problem)
  const compiled: CompiledLevel = {
    from: level.from,
    allow: (level.allow ?? []).map(compileRule),
    ask: (level.ask ?? []).map(compileRule),
    deny: (level.deny ?? []).map(compileRule),
  }
  compiledLevels.set(level, compiled)
  return compiled
}

function compileRule(text: string): CompiledRule {
  const match = PERMISSION_RULE.exec(text)!
  const tool = match[1]!.toLowerCase()
  const source = match[2]
  if (source === undefined) return { text, tool, exact: false }
  return { text, tool, pattern: source.split('*'), exact: !source.includes('*') }
}

/** A pattern split at its `*`s: `npm test*` is `['npm test', '']`. */
type GlobPattern = readonly string[]

/**
 * Whether `pattern` matches the whole of `text`. Linear in `text` for a given pattern (each
 * piece is found once, leftmost, which is enough for a pattern whose only wildcard is `*`),
 * where a regular expression of several `.*` backtracks over a long subject.
 */
export function globMatches(pattern: GlobPattern, text: string): boolean {
  const first = pattern[0]!
  if (pattern.length === 1) return text === first
  const last = pattern[pattern.length - 1]!
  if (text.length < first.length + last.length || !text.startsWith(first) || !text.endsWith(last)) return false
  let at = first.length
  const end = text.length - last.length
  for (let index = 1; index < pattern.length - 1; index++) {
    const piece = pattern[index]!
    const found = text.indexOf(piece, at)
    if (found === -1 || found + piece.length > end) return false
    at = found + piece.length
  }
  return true
}

function toolMatches(rule: CompiledRule, tool: string): boolean {
  // `mcp__github__*`, and `mcp__github` alone: every tool of that server (`ruleToolMatches`).
  return ruleToolMatches(rule.tool, tool)
}

/**
 * A `deny` or `ask` rule matches a command when it matches the whole command or any
 * simple command in it: `deny: [bash(rm *)]` catches `make && rm -rf build`.
 */
function restrictiveMatch(rule: CompiledRule, call: PolicyCall, tool: string): boolean {
  if (!toolMatches(rule, tool)) return false
  if (rule.pattern === undefined) return true
  const { subject } = call
  if (globMatches(rule.pattern, subject.text)) return true
  return restrictiveTexts(subject).forms.some((form) => globMatches(rule.pattern!, form))
}

/** Every form of every simple command of `subject` (`restrictiveForms`), read once per subject however many rules and levels test it. */
const formsOf = new WeakMap<CallSubject, RestrictiveForms>()
function restrictiveTexts(subject: CallSubject): RestrictiveForms {
  let forms = formsOf.get(subject)
  if (forms === undefined) {
    forms = restrictiveForms(subject)
    formsOf.set(subject, forms)
  }
  return forms
}

/**
 * Where the reading cannot tell what a command runs, a `deny` or `ask` rule with a pattern
 * for its tool makes it asked: the rule might have matched what the reading cannot see.
 */
function unsureUnder(rules: readonly CompiledRule[], call: PolicyCall, tool: string): CompiledRule | undefined {
  const candidate = rules.find((rule) => rule.pattern !== undefined && toolMatches(rule, tool))
  return candidate !== undefined && restrictiveTexts(call.subject).unsure ? candidate : undefined
}

/**
 * `allow` rules match a command only as a whole: a bare tool name, or an exact pattern
 * equal to the whole command, allows it; otherwise every simple command in it must be
 * plain (no substitution, no redirection) and matched by some allow rule of the level.
 */
function allowedBy(rules: readonly CompiledRule[], call: PolicyCall, tool: string): CompiledRule | undefined {
  const candidates = rules.filter((rule) => toolMatches(rule, tool))
  if (candidates.length === 0) return undefined
  const { subject } = call
  const bare = candidates.find((rule) => rule.pattern === undefined)
  if (bare) return bare
  // A subject seen only in part can be allowed by no pattern: what follows the part could be anything.
  if (!subject.complete) return undefined
  const whole = candidates.find((rule) => rule.exact && globMatches(rule.pattern!, subject.text))
  if (whole) return whole
  if (subject.segments === undefined) return candidates.find((rule) => globMatches(rule.pattern!, subject.text))
  if (subject.segments.length === 0) return undefined
  let first: CompiledRule | undefined
  for (const segment of subject.segments) {
    const rule = segmentRule(candidates, segment)
    if (rule === undefined) return undefined
    first ??= rule
  }
  return first
}

function segmentRule(rules: readonly CompiledRule[], segment: CommandSegment): CompiledRule | undefined {
  return rules.find((rule) => rule.pattern !== undefined && (rule.exact || segment.plain) && globMatches(rule.pattern, segment.text))
}

/** One level's verdict on a call. */
export function levelVerdict(level: CompiledLevel, call: PolicyCall): PolicyVerdict {
  const tool = call.tool.toLowerCase()
  const deny = level.deny.find((rule) => restrictiveMatch(rule, call, tool))
  if (deny) return { verdict: 'deny', rule: `${deny.text} (${level.from})` }
  const ask = level.ask.find((rule) => restrictiveMatch(rule, call, tool))
  if (ask) return { verdict: 'ask', rule: `${ask.text} (${level.from})` }
  const unsure = unsureUnder(level.deny, call, tool) ?? unsureUnder(level.ask, call, tool)
  if (unsure) return { verdict: 'ask', rule: `${unsure.text} (${level.from}; dsh cannot tell what this command runs)` }
  const allow = allowedBy(level.allow, call, tool)
  if (allow) return { verdict: 'allow', rule: `${allow.text} (${level.from})` }
  return { verdict: undefined }
}

const RANK: Readonly<Record<Verdict, number>> = { allow: 1, ask: 2, deny: 3 }

/** The verdict of every level together: the most restrictive one wins (the first level saying it names the rule). */
export function policyVerdict(levels: readonly PermissionLevel[], call: PolicyCall): PolicyVerdict {
  let decided: PolicyVerdict = { verdict: undefined }
  for (const level of levels) {
    const verdict = levelVerdict(compileLevel(level), call)
    if (verdict.verdict === undefined) continue
    if (decided.verdict === undefined || RANK[verdict.verdict] > RANK[decided.verdict]) decided = verdict
    if (decided.verdict === 'deny') break
  }
  return decided
}

export { PERMISSION_LISTS }
