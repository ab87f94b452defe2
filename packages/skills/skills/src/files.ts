/**
 * The files beside a skill's `SKILL.md`, as the `skill` tool lists them for the model to
 * `read`: walked when the skill is loaded (they are the skill's to change), bounded in
 * number and depth, symlinked folders not entered (no loop, no walk out of the folder).
 */
import { readdirSync, type Dirent } from 'node:fs'
import { join, relative } from 'node:path'
import { readProblem } from '@dsh/agent-definitions'

/** At most this many paths are listed; the rest are counted. */
export const MAX_LISTED_FILES = 200
const MAX_DEPTH = 6

export interface SkillFiles {
  /** Absolute paths, in name order, folder by folder; `SKILL.md` itself left out. */
  files: string[]
  /** Files found beyond `MAX_LISTED_FILES`. */
  more: number
  /** One line each: a folder that could not be read. */
  problems: string[]
}

export function skillFiles(dir: string): SkillFiles {
  const found: SkillFiles = { files: [], more: 0, problems: [] }
  const walk = (folder: string, depth: number) => {
    let entries: Dirent[]
    try {
      entries = readdirSync(folder, { withFileTypes: true })
    } catch (error) {
      found.problems.push(`${folder}: ${readProblem(error)}`)
      return
    }
    for (const entry of entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))) {
      const path = join(folder, entry.name)
      if (depth === 0 && entry.name === 'SKILL.md') continue
      if (entry.isDirectory()) {
        if (depth + 1 < MAX_DEPTH) walk(path, depth + 1)
        else found.problems.push(`${relative(dir, path)}: deeper than ${MAX_DEPTH} folders, not listed`)
      } else if (found.files.length < MAX_LISTED_FILES) found.files.push(path)
      else found.more += 1
    }
  }
  walk(dir, 0)
  return found
}
