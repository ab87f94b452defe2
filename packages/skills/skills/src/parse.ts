/**
 * One `SKILL.md` → a `Skill`, by the Agent Skills format: YAML front matter with `name` and
 * `description` (required), `license`, `compatibility` and `metadata` (kept by the format,
 * unused here), `allowed-tools` (never applied: a skill is instructions, and instructions
 * never grant anything), then the body. The front matter is read by agent definitions'
 * one reader, so a bad file is the same one-line error naming the file and the line.
 */
import { createHash } from 'node:crypto'
import { basename, dirname } from 'node:path'
import { printable } from '@dsh/base'
import { DefinitionError, NAME_PATTERN, parseFrontMatter } from '@dsh/agent-definitions'
import { SkillError } from './errors.js'
import type { Skill, SkillOrigin } from './types.js'

/** The format's bound on a description. */
const MAX_DESCRIPTION_CHARS = 1024
/** Fields of the format dsh reads no meaning from, silently: a skill written for any harness loads. */
const QUIET_FIELDS = new Set(['license', 'compatibility', 'metadata'])

export interface ParsedSkill {
  skill: Skill
  notes: string[]
  warnings: string[]
}

/** Parse one `SKILL.md`'s text; `file` names it in errors. Throws `SkillError`. */
export function parseSkill(text: string, file: string, origin: SkillOrigin): ParsedSkill {
  const fail = (code: 'INVALID_FIELD' | 'BAD_NAME', line: number, message: string): never => {
    throw new SkillError(code, `${file}:${line}: ${message}`)
  }
  let front: ReturnType<typeof parseFrontMatter>
  try {
    front = parseFrontMatter(text, file, { file: 'a skill', body: "the skill's instructions" })
  } catch (error) {
    if (error instanceof DefinitionError) throw new SkillError(error.code as 'SYNTAX', error.message)
    throw error
  }
  const notes: string[] = []
  const warnings: string[] = []
  const field = (name: string) => front.fields.find((candidate) => candidate.name === name)
  for (const { name, line } of front.fields) {
    if (name === 'name' || name === 'description' || name === 'allowed-tools' || QUIET_FIELDS.has(name)) continue
    notes.push(`${file}:${line}: note: field "${printable(name)}" is not used by dsh`)
  }
  const text1 = (name: 'name' | 'description') => {
    const found = field(name)
    if (found === undefined) fail('INVALID_FIELD', front.frontLine, name === 'name' ? 'a skill needs a name (name: release-notes)' : 'a skill needs a description: what it does and when to use it (every agent that may use it reads this)')
    if (typeof found!.value !== 'string' || found!.value.trim() === '') fail('INVALID_FIELD', found!.line, `${name} must be non-empty text`)
    return { value: (found!.value as string).trim(), line: found!.line }
  }
  const name = text1('name')
  if (!NAME_PATTERN.test(name.value)) {
    const why = /[/\\]|\.\./.test(name.value) ? 'it may not contain path characters' : 'use letters, digits, - and _, at most 64, starting with a letter or digit'
    fail('BAD_NAME', name.line, `name "${printable(name.value)}" is not a plain word: ${why}`)
  }
  const folder = basename(dirname(file))
  if (folder !== name.value) notes.push(`${file}:${name.line}: note: skill "${name.value}" is in a folder named "${printable(folder)}"; the format names the folder after the skill`)
  // One line: it is rendered into a system prompt list, one skill a line.
  const description = text1('description')
  const folded = description.value.replace(/\s+/g, ' ')
  if (folded.length > MAX_DESCRIPTION_CHARS) fail('INVALID_FIELD', description.line, `description is longer than ${MAX_DESCRIPTION_CHARS} characters; say what the skill does and when to use it in a sentence or two`)
  const allowed = field('allowed-tools')
  if (allowed !== undefined) {
    // A skill is a file anyone may have put there (a project's, a download): it adds
    // instructions and never widens what runs unasked, whoever wrote it.
    warnings.push(
      `${file}:${allowed.line}: skill "${name.value}": allowed-tools is not applied, since a skill adds instructions and never grants tools or permissions; to let those tools run unasked, add rules to allow in the approvals entry of your own config`,
    )
  }
  return {
    skill: {
      name: name.value,
      description: folded,
      dir: dirname(file),
      file,
      instructions: front.body.trim(),
      origin,
      hash: createHash('sha256').update(text).digest('hex').slice(0, 16),
    },
    notes,
    warnings,
  }
}
