/** The public face of skills; the README documents every name here. */
export { SkillsService, SkillsService as default, type SkillsConfig } from './service.js'
export { loadSkills, MAX_SKILL_BYTES, skillDirectories, type SkillDirs } from './discover.js'
export { parseSkill, type ParsedSkill } from './parse.js'
export { MAX_LISTED_FILES, skillFiles, type SkillFiles } from './files.js'
export { SkillError, type SkillErrorCode } from './errors.js'
export type { Skill, SkillOrigin, SkillSet } from './types.js'
