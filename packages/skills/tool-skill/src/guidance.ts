import type { Skill } from '@dsh/skills'

/** After the shell's guidance (400): what an agent can do comes before how to go about a task. */
export const SKILLS_SECTION_ORDER = 450

/**
 * The system-prompt section listing `skills` (those one agent may use): their names and
 * descriptions alone, each skill a line, in name order. A pure function of the list, so
 * an agent's prompt is byte-identical on every turn and the provider's prompt cache holds.
 */
export function skillsGuidance(toolName: string, skills: readonly Skill[]): string {
  return [
    '# Skills',
    `Skills are instructions for particular kinds of task, kept on disk until they are needed. When a task matches a skill's description, call \`${toolName}\` with its name before you start, and follow what it returns; it also lists the skill's files, to read when the instructions call for them.`,
    ...skills.map((skill) => `- ${skill.name}: ${skill.description}`),
  ].join('\n')
}
