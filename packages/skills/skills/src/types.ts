/** Where a skill was found: `project` (./.dsh/skills), `claude-code` (./.claude/skills), `user` (~/.dsh/skills). */
export type SkillOrigin = 'project' | 'claude-code' | 'user'

/** One skill: a folder with a `SKILL.md` (the Agent Skills format) and whatever files are beside it. */
export interface Skill {
  /** One word: what the model names in the `skill` tool. */
  name: string
  /** When to use it, folded to one line: every agent that may use it reads it in its system prompt. */
  description: string
  /** The folder (absolute): its files are the skill's resources. */
  dir: string
  /** The `SKILL.md` file (absolute). */
  file: string
  /** The body after the front matter, trimmed: what the `skill` tool returns. */
  instructions: string
  origin: SkillOrigin
  /** SHA-256 of the file, hex, the first 16 characters. */
  hash: string
}

/** What a load found: the skills (names unique, first directory wins, sorted by name) and one-line notes. */
export interface SkillSet {
  skills: readonly Skill[]
  /** `FILE:LINE: note: …`: a field dsh does not use, a shadowed skill, a name that differs from its folder's. */
  notes: readonly string[]
  /** `FILE:LINE: …`: what a skill asked for and does not get (its `allowed-tools`), with what to change; said at every start. */
  warnings: readonly string[]
}
