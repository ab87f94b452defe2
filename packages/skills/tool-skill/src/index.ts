/** The public face of the skill tool; the README documents every name here. */
export { renderSkill, SkillToolPlugin, SkillToolPlugin as default, type SkillToolArgs, type SkillToolConfig } from './plugin.js'
export { SKILLS_SECTION_ORDER, skillsGuidance } from './guidance.js'
