/**
 * One definition file's text → an `AgentDefinition`: YAML front matter between `---`
 * lines, then the body (the child's instructions). Every problem is one line that names
 * the file and, where there is one, the line: a user fixes a definition in an editor.
 */
import { createHash } from 'node:crypto'
import { cleanPermissionLevel, isEmptyPermissionLevel, isRecord, permissionLevelProblem, printable, TOOL_NAME_OR_PATTERN, type PermissionLevel } from '@dsh/base'
import { DefinitionError } from './errors.js'
import { parseFrontMatter } from './front-matter.js'
import { parseMcpServers } from './mcp-servers.js'
import { DEFINITION_FIELDS, type AgentDefinition, type BackgroundPolicy, type DefinitionField, type DefinitionFlavour, type DefinitionSource } from './types.js'

/** A definition is a page of instructions; a file beyond this is a mistake (or an attack), refused unread. */
export const MAX_DEFINITION_BYTES = 1024 * 1024

/** A name is one word: it becomes an enum value and a label, never a path. */
export const NAME_PATTERN = /^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$/

const MAX_DESCRIPTION_CHARS = 1000
const BACKGROUND: readonly BackgroundPolicy[] = ['allowed', 'always', 'never']

/**
 * Claude Code's front matter (`.claude/agents/*.md`): the fields dsh maps, and those it
 * knows but does not use (each a note, never an error: the team's files keep working).
 */
const CLAUDE_MAPPED = new Set(['name', 'description', 'tools', 'disallowedTools', 'model', 'mcpServers'])
/**
 * Claude Code tool names with a dsh counterpart (the file tools of `@dsh/tool-files` and
 * `bash`), mapped without a note: the team's helper means the same tool. `MultiEdit` is
 * `edit`, which takes several edits in one call. Any other name is left out with a note.
 */
const CLAUDE_TOOLS: Readonly<Record<string, string>> = { Read: 'read', Write: 'write', Edit: 'edit', MultiEdit: 'edit', Glob: 'glob', Grep: 'grep', LS: 'ls', Bash: 'bash' }

export interface ParsedDefinition {
  definition: AgentDefinition
  /** One line each: a Claude Code field or tool name dsh does not map. */
  notes: string[]
  /** One line each: what of the file is not applied because a project's file may not widen (see `fromProject`). */
  warnings: string[]
}

/**
 * Whether a definition came from the project dsh runs in (`./.dsh/agents`,
 * `./.claude/agents`): a repository's author wrote it, not the user. Such a file may
 * narrow what the user's own config allows and never widen it.
 */
export function fromProject(origin: DefinitionSource['origin']): boolean {
  return origin === 'project' || origin === 'claude-code'
}

/** Parse one file's text; `file` names it in errors. Throws `DefinitionError`. */
export function parseDefinition(text: string, file: string, origin: DefinitionSource['origin'], flavour: DefinitionFlavour): ParsedDefinition {
  const where = (line?: number) => (line === undefined ? `${file}` : `${file}:${line}`)
  const fail = (code: ConstructorParameters<typeof DefinitionError>[0], line: number | undefined, message: string): never => {
    throw new DefinitionError(code, `${where(line)}: ${message}`)
  }
  const { fields, frontLine, body } = parseFrontMatter(text, file, { file: 'a definition', body: 'the instructions' })
  const notes: string[] = []
  const warnings: string[] = []
  const lines: Partial<Record<DefinitionField, number>> = {}
  const raw: Partial<Record<DefinitionField, unknown>> = {}
  for (const { name, value, line } of fields) {
    if (flavour === 'claude-code' && !CLAUDE_MAPPED.has(name)) {
      notes.push(`${where(line)}: note: Claude Code field "${printable(name)}" is not used by dsh`)
      continue
    }
    if (!(DEFINITION_FIELDS as readonly string[]).includes(name)) {
      fail('UNKNOWN_FIELD', line, `unknown field "${printable(name)}" (fields: ${DEFINITION_FIELDS.join(', ')})`)
    }
    lines[name as DefinitionField] = line
    raw[name as DefinitionField] = value
  }

  const string = (field: DefinitionField, value: unknown): string => {
    if (typeof value !== 'string' || value.trim() === '') fail('INVALID_FIELD', lines[field], `${field} must be non-empty text`)
    return (value as string).trim()
  }
  const natural = (field: DefinitionField, value: unknown, least: number): number => {
    if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < least) fail('INVALID_FIELD', lines[field], `${field} must be a whole number of at least ${least}`)
    return value as number
  }

  if (raw.name === undefined) fail('INVALID_FIELD', frontLine, 'a definition needs a name (name: reviewer)')
  const name = string('name', raw.name)
  if (!NAME_PATTERN.test(name)) {
    const why = /[/\\]|\.\./.test(name) ? 'it may not contain path characters' : 'use letters, digits, - and _, at most 64, starting with a letter or digit'
    fail('BAD_NAME', lines.name, `name "${printable(name)}" is not a plain word: ${why}`)
  }
  if (raw.description === undefined) fail('INVALID_FIELD', frontLine, `"${name}" needs a description: when to use it (the parent's model reads it)`)
  // One line: it is rendered into a tool description, which must not break into sections.
  const description = string('description', raw.description).replace(/\s+/g, ' ')
  if (description.length > MAX_DESCRIPTION_CHARS) fail('INVALID_FIELD', lines.description, `description is longer than ${MAX_DESCRIPTION_CHARS} characters; say when to use the helper in a sentence or two`)

  const definition: AgentDefinition = {
    name,
    description,
    provider: raw.provider === undefined ? 'spawn' : string('provider', raw.provider),
    background: 'allowed',
    continuable: false,
    instructions: body.trim(),
    source: { file, origin, flavour, hash: createHash('sha256').update(text).digest('hex').slice(0, 16), lines },
  }
  if (raw.model !== undefined) {
    const model = string('model', raw.model)
    // Claude Code's model names are its own aliases; `inherit` is what dsh does anyway.
    if (flavour === 'claude-code') {
      if (model !== 'inherit') notes.push(`${where(lines.model)}: note: Claude Code model "${printable(model)}" is not a dsh model spec; the helper runs on the parent's model`)
    } else definition.model = model
  }
  for (const field of ['tools', 'disallowedTools'] as const) {
    if (raw[field] === undefined) continue
    const names = toolList(field, raw[field], lines[field], flavour, notes, where, fail)
    if (field === 'tools') definition.tools = names
    else definition.disallowedTools = names
  }
  if (raw.skills !== undefined) {
    // A YAML list or a comma-separated line, as tools; [] is no skill at all.
    const items = typeof raw.skills === 'string' ? raw.skills.split(',').map((item) => item.trim()).filter((item) => item !== '') : raw.skills
    if (!Array.isArray(items) || items.some((item) => typeof item !== 'string' || !NAME_PATTERN.test(item))) fail('INVALID_FIELD', lines.skills, 'skills must be a list of skill names (skills: [release-notes])')
    definition.skills = [...new Set(items as string[])]
  }
  if (raw.mcpServers !== undefined) definition.mcpServers = parseMcpServers(raw.mcpServers, (message) => fail('INVALID_FIELD', lines.mcpServers, message))
  if (raw.maxDepth !== undefined) definition.maxDepth = natural('maxDepth', raw.maxDepth, 0)
  if (raw.timeoutMs !== undefined) definition.timeoutMs = natural('timeoutMs', raw.timeoutMs, 1)
  for (const [field, limit] of [['maxOutputTokens', 'outputTokens'], ['maxInputTokens', 'inputTokens'], ['maxChildren', 'children'], ['maxWallTimeMs', 'wallTimeMs']] as const) {
    if (raw[field] === undefined) continue
    const value = natural(field, raw[field], 1)
    if (value > 1e12) fail('INVALID_FIELD', lines[field], `${field} must be at most 10^12`)
    definition.budget = { ...definition.budget, [limit]: value }
  }
  if (raw.maxCost !== undefined) {
    const cost = raw.maxCost
    if (typeof cost !== 'number' || !Number.isFinite(cost) || cost <= 0 || cost > 1e9) fail('INVALID_FIELD', lines.maxCost, 'maxCost must be a positive amount, in the unit of the prices table, at most 10^9')
    definition.budget = { ...definition.budget, cost: cost as number }
  }
  if (raw.permissions !== undefined) {
    const rules = raw.permissions
    if (!isRecord(rules) || Object.hasOwn(rules, 'from')) fail('INVALID_FIELD', lines.permissions, 'permissions must be a mapping of allow, ask and/or deny lists of rules (allow: ["bash(npm test*)"])')
    // Named after the helper, so a decision says whose rule it was.
    const level = { ...(rules as Record<string, unknown>), from: `helper ${name}` }
    const problem = permissionLevelProblem(level, 'permissions')
    if (problem) fail('INVALID_FIELD', lines.permissions, problem)
    let clean = cleanPermissionLevel(level as PermissionLevel)
    // A project's file (a repository someone cloned) may narrow, never widen: where no
    // level of the user's has a rule, its allow would let the helper run commands unasked
    // under the user's reject or ask default. Its ask and deny still apply; what the user's
    // own levels allow stays allowed, so dropping the allow is its intersection with them.
    if (fromProject(origin) && clean.allow !== undefined) {
      warnings.push(
        `${where(lines.permissions)}: helper "${name}": permissions.allow is not applied, since a project's definition may narrow what your own config allows and never widen it; to have ${clean.allow.length > 1 ? `its ${clean.allow.length} allow rules` : printable(JSON.stringify(clean.allow[0]))} run unasked, add ${clean.allow.length > 1 ? 'them' : 'it'} to allow in the approvals entry of your own config, or move the file to ~/.dsh/agents`,
      )
      const { allow: _notApplied, ...narrowing } = clean
      clean = narrowing
    }
    if (!isEmptyPermissionLevel(clean)) definition.permissions = clean
  }
  if (raw.workspace !== undefined) {
    if (raw.workspace !== 'shared' && raw.workspace !== 'worktree' && raw.workspace !== 'copy') fail('INVALID_FIELD', lines.workspace, 'workspace must be one of shared, worktree, copy')
    definition.workspace = raw.workspace as 'shared' | 'worktree' | 'copy'
  }
  if (raw.sandbox !== undefined) {
    if (raw.sandbox !== true && raw.sandbox !== false && raw.sandbox !== 'no-network') fail('INVALID_FIELD', lines.sandbox, 'sandbox must be true, false or no-network')
    definition.sandbox = raw.sandbox as boolean | 'no-network'
  }
  if (raw.background !== undefined) {
    if (!BACKGROUND.includes(raw.background as BackgroundPolicy)) fail('INVALID_FIELD', lines.background, `background must be one of ${BACKGROUND.join(', ')}`)
    definition.background = raw.background as BackgroundPolicy
  }
  if (raw.continuable !== undefined) {
    if (typeof raw.continuable !== 'boolean') fail('INVALID_FIELD', lines.continuable, 'continuable must be true or false')
    definition.continuable = raw.continuable as boolean
  }
  // In the file's order, whichever check found them.
  const lineOf = (note: string) => Number(/^.*?:(\d+): /.exec(note.slice(file.length))?.[1] ?? 0)
  return { definition, notes: notes.sort((a, b) => lineOf(a) - lineOf(b)), warnings }
}

/** A tool list: a YAML list, or Claude Code's comma-separated line (`Read, Grep, Bash`). */
function toolList(
  field: 'tools' | 'disallowedTools',
  value: unknown,
  line: number | undefined,
  flavour: DefinitionFlavour,
  notes: string[],
  where: (line?: number) => string,
  fail: (code: 'INVALID_FIELD', line: number | undefined, message: string) => never,
): string[] {
  const items = typeof value === 'string' ? value.split(',').map((item) => item.trim()).filter((item) => item !== '') : value
  if (!Array.isArray(items) || items.some((item) => typeof item !== 'string')) fail('INVALID_FIELD', line, `${field} must be a list of tool names`)
  const names: string[] = []
  for (const item of items as string[]) {
    if (flavour === 'claude-code') {
      const mapped = CLAUDE_TOOLS[item] ?? (/^[a-z][a-z0-9_-]*\*?$/.test(item) ? item : undefined)
      if (mapped === undefined) notes.push(`${where(line)}: note: Claude Code tool "${printable(item)}" has no dsh counterpart; left out of ${field}`)
      else if (!names.includes(mapped)) names.push(mapped)
      continue
    }
    // A name, or a name ending in * for the tools that start so (mcp__github__*).
    if (!TOOL_NAME_OR_PATTERN.test(item)) fail('INVALID_FIELD', line, `${field}: "${printable(item)}" is not a tool name (or a name ending in * for the tools that start so)`)
    if (!names.includes(item)) names.push(item)
  }
  return names
}
