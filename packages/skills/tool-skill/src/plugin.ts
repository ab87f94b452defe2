import { isAbsolute, relative } from 'node:path'
import type { Context } from 'cordis'
import Schema from 'schemastery'
import type { ToolExecution, ToolOutput } from '@dsh/tools'
import type {} from '@dsh/agent'
import { skillFiles, type Skill } from '@dsh/skills'
import { SKILLS_SECTION_ORDER, skillsGuidance } from './guidance.js'

export interface SkillToolConfig {
  toolName: string
}

export interface SkillToolArgs {
  name: string
}

/**
 * The `skill` tool and the prompt section that lists each agent's skills (`ctx.skills`).
 * Loading a skill is a read: not a side effect, nothing asked. Registered only when some
 * skill exists, so a composition without skills sends exactly the requests it did before.
 */
export class SkillToolPlugin {
  static inject = ['skills', 'tools', 'agents']
  static Config: Schema<SkillToolConfig> = Schema.object({
    toolName: Schema.string().pattern(/^[A-Za-z0-9_-]{1,64}$/).default('skill').description('The model-facing tool name.'),
  })

  constructor(private readonly ctx: Context, config: SkillToolConfig) {
    if (ctx.skills.list().length === 0) return
    const { toolName } = config
    ctx.tools.register<SkillToolArgs>({
      name: toolName,
      description: "Load a skill: its instructions and the paths of the files beside it. Skills you may use are listed in your instructions under # Skills; load one when a task matches its description.",
      parameters: {
        type: 'object',
        properties: { name: { type: 'string', minLength: 1, description: 'The skill\'s name, as listed under # Skills.' } },
        required: ['name'],
        additionalProperties: false,
      },
      concurrencySafe: true,
      execute: (args, exec) => this.execute(args, exec),
    })
    ctx.agents.addPromptSection({
      name: 'skills',
      order: SKILLS_SECTION_ORDER,
      tool: toolName,
      // An agent whose helper definition allows no skill gets no section (its skill calls are refused).
      visible: (agent) => ctx.skills.forAgent(agent).length > 0,
      render: (agent) => skillsGuidance(toolName, ctx.skills.forAgent(agent)),
    })
  }

  private execute(args: SkillToolArgs, exec: ToolExecution): ToolOutput {
    const mine = this.ctx.skills.forAgent(exec.agent)
    const skill = mine.find((candidate) => candidate.name === args.name)
    if (skill === undefined) {
      return { isError: true, content: `no skill named ${JSON.stringify(args.name)} is yours to use (yours: ${mine.map((candidate) => candidate.name).join(', ') || 'none'})` }
    }
    return renderSkill(skill, exec.agent.session.header.cwd)
  }
}

/**
 * What a loaded skill reads as: where it is, its instructions, then the files beside it,
 * as paths `read` takes: relative to the agent's working directory `cwd` when inside it (a
 * project's skill; the same text wherever the project is checked out), else absolute.
 */
export function renderSkill(skill: Skill, cwd: string): string {
  const shown = (path: string) => {
    const inside = relative(cwd, path)
    return inside !== '' && !inside.startsWith('..') && !isAbsolute(inside) ? inside : path
  }
  const { files, more, problems } = skillFiles(skill.dir)
  const lines = [`Skill "${skill.name}" (${shown(skill.file)}):`, '', skill.instructions || '(no instructions)']
  if (files.length > 0 || more > 0 || problems.length > 0) {
    lines.push('', `Files beside it in ${shown(skill.dir)} (read them when the instructions call for them):`)
    for (const file of files) lines.push(`- ${shown(file)}`)
    if (more > 0) lines.push(`- … and ${more} more`)
    for (const problem of problems) lines.push(`- (not listed: ${problem})`)
  }
  return lines.join('\n')
}

export default SkillToolPlugin
