/**
 * Where skills are found: each folder directly in `./.dsh/skills/` (the project's),
 * `./.claude/skills/` when asked for (a team's Claude Code skills) and `~/.dsh/skills/`
 * (the user's) that holds a `SKILL.md`. The user's own skill wins a name clash: what a
 * project brings (a repository someone cloned) may narrow, never replace it, and each skill
 * of a project's that it shadows is a warning naming both files. Between the project's
 * directories the first wins, each shadowed skill a note. Loading is all or nothing: a bad
 * skill fails the whole load.
 */
import { readdirSync, statSync } from 'node:fs'
import { homedir } from 'node:os'
import { join, resolve } from 'node:path'
import { DefinitionError, readFrontMatterFile, readProblem } from '@dsh/agent-definitions'
import { SkillError } from './errors.js'
import { parseSkill } from './parse.js'
import type { Skill, SkillOrigin, SkillSet } from './types.js'

/** A `SKILL.md` is instructions for one task; a file beyond this is refused unread. */
export const MAX_SKILL_BYTES = 1024 * 1024

export interface SkillDirs {
  /** The project directory (`./.dsh/skills`, `./.claude/skills` are under it). Default: the process's cwd. */
  cwd?: string
  /** dsh's home (`~/.dsh/skills` is under it). Default: `$DSH_HOME`, else `~/.dsh`. */
  home?: string
  /** Read `./.dsh/skills` (default true). */
  project?: boolean
  /** Read `<home>/skills` (default true). */
  user?: boolean
  /** Read `./.claude/skills` too (default false). */
  claudeCode?: boolean
}

/** The directories `options` name, most important first: the user's own, then the project's. */
export function skillDirectories(options: SkillDirs = {}): { path: string; origin: SkillOrigin }[] {
  const cwd = resolve(options.cwd ?? process.cwd())
  const home = resolve(options.home ?? (process.env.DSH_HOME || join(homedir(), '.dsh')))
  const user = join(home, 'skills')
  const project = join(cwd, '.dsh', 'skills')
  const dirs: { path: string; origin: SkillOrigin }[] = []
  if (options.user !== false) dirs.push({ path: user, origin: 'user' })
  // Started in the home directory, the project's skills directory is the user's own.
  if (options.project !== false) dirs.push({ path: project, origin: project === user && options.user !== false ? 'user' : 'project' })
  if (options.claudeCode === true) dirs.push({ path: join(cwd, '.claude', 'skills'), origin: 'claude-code' })
  return dirs
}

/** Read every skill `options` point at, sorted by name. Throws `SkillError` naming the file. */
export function loadSkills(options: SkillDirs = {}): SkillSet {
  const byName = new Map<string, Skill>()
  const notes: string[] = []
  const warnings: string[] = []
  const seen = new Set<string>()
  for (const dir of skillDirectories(options)) {
    if (seen.has(dir.path)) continue
    seen.add(dir.path)
    const here = new Map<string, string>()
    for (const file of skillFiles(dir.path)) {
      const parsed = parseSkill(readSkillFile(file), file, dir.origin)
      const { skill } = parsed
      const twin = here.get(skill.name)
      if (twin !== undefined) throw new SkillError('DUPLICATE_NAME', `${file}: skill "${skill.name}" is also defined by ${twin}; one directory defines each name once`)
      here.set(skill.name, file)
      notes.push(...parsed.notes)
      const winner = byName.get(skill.name)
      if (winner !== undefined && winner.origin === 'user' && dir.origin !== 'user') {
        const warning = `${file}: warning: skill "${skill.name}" is also your own ${winner.file}; a project's skill may not replace yours, so yours is used (rename one of them to have both)`
        warnings.push(warning)
        notes.push(warning)
        continue
      }
      if (winner !== undefined) {
        notes.push(`${file}: note: skill "${skill.name}" is shadowed by ${winner.file} (${winner.origin} skills win)`)
        continue
      }
      byName.set(skill.name, skill)
      warnings.push(...parsed.warnings)
      notes.push(...parsed.warnings)
    }
  }
  // By name: the listing in every prompt is byte-stable whatever the directories' order.
  const skills = [...byName.values()].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))
  return { skills, notes, warnings }
}

/** `dir/<folder>/SKILL.md` for each folder of `dir` that has one, by folder name. */
function skillFiles(dir: string): string[] {
  let names: string[]
  try {
    names = readdirSync(dir)
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return []
    throw new SkillError('UNREADABLE', `${dir}: cannot read the skills directory: ${readProblem(error)}`)
  }
  const files: string[] = []
  for (const name of names.sort()) {
    const folder = join(dir, name)
    const file = join(folder, 'SKILL.md')
    try {
      // Follows symlinks: a loop is ELOOP here, named, not a hang.
      if (!statSync(folder).isDirectory()) continue
      statSync(file)
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') continue
      throw new SkillError('UNREADABLE', `${(error as NodeJS.ErrnoException).path ?? folder}: cannot read the skill: ${readProblem(error)}`)
    }
    files.push(file)
  }
  return files
}

function readSkillFile(file: string): string {
  try {
    return readFrontMatterFile(file, MAX_SKILL_BYTES, 'skill', "a skill's instructions are a page; put long material in files beside it")
  } catch (error) {
    if (error instanceof DefinitionError) throw new SkillError(error.code as 'UNREADABLE', error.message)
    throw error
  }
}
