import { Context, Service } from 'cordis'
import Schema from 'schemastery'
import type { Agent } from '@dsh/agent'
import type {} from '@dsh/agent-definitions'
import { loadSkills, type SkillDirs } from './discover.js'
import type { Skill, SkillSet } from './types.js'

declare module 'cordis' {
  interface Context {
    skills: SkillsService
  }
}

export interface SkillsConfig {
  project: boolean
  user: boolean
  claudeCode: boolean
  cwd?: string
  home?: string
}

/**
 * `ctx.skills`: the skills found when the plugin starts (a change on disk applies to the
 * next composition, as for agent definitions, and keeps every prompt's listing
 * byte-stable), and which of them each agent may use. A bad skill fails the start.
 */
export class SkillsService extends Service {
  static Config: Schema<SkillsConfig> = Schema.object({
    project: Schema.boolean().default(true).description('Read ./.dsh/skills (wins over the others on a name clash).'),
    user: Schema.boolean().default(true).description('Read ~/.dsh/skills ($DSH_HOME/skills).'),
    claudeCode: Schema.boolean().default(false).description('Read ./.claude/skills too (after ./.dsh/skills, before ~/.dsh/skills).'),
    cwd: Schema.string().min(1).description('The project directory (default: where dsh runs).'),
    home: Schema.string().min(1).description("dsh's home (default: $DSH_HOME, else ~/.dsh)."),
  })

  private readonly set: SkillSet

  constructor(ctx: Context, config: Partial<SkillsConfig> = {}) {
    super(ctx, 'skills')
    const dirs: SkillDirs = {}
    for (const key of ['project', 'user', 'claudeCode', 'cwd', 'home'] as const) if (config[key] !== undefined) (dirs as Record<string, unknown>)[key] = config[key]
    // Synchronous on purpose: a few small files, and the set is complete the moment the service exists.
    this.set = loadSkills(dirs)
    const log = ctx.logger('skills')
    for (const warning of this.set.warnings) log.warn('%s', warning)
  }

  /** Every skill, by name. */
  list(): readonly Skill[] {
    return this.set.skills
  }

  get(name: string): Skill | undefined {
    return this.set.skills.find((skill) => skill.name === name)
  }

  /** Shadowed skills, fields dsh does not use, and the warnings, one line each. */
  get notes(): readonly string[] {
    return this.set.notes
  }

  /** What a skill asked for and does not get (`allowed-tools`), one line each with what to change (logged at start). */
  get warnings(): readonly string[] {
    return this.set.warnings
  }

  /**
   * The skills `agent` may use, by name: all of them, narrowed by the `skills` list of the
   * helper definition (`@dsh/agent-definitions`) it or any agent above it was started
   * from, so a helper's own children get no skill the helper was not given. A helper whose
   * definition is gone (a resumed child) gets none: what it was given is no longer known.
   */
  forAgent(agent: Agent): readonly Skill[] {
    const definitions = this.ctx.get('agentDefinitions')
    let allowed: Set<string> | undefined
    for (const at of [agent, ...agent.ancestors()]) {
      const helper = at.session.header.helper
      if (helper === undefined) continue
      const definition = definitions?.get(helper.name)
      const limit = definition === undefined ? [] : definition.skills
      if (limit === undefined) continue
      allowed = new Set(limit.filter((name) => allowed === undefined || allowed.has(name)))
    }
    return allowed === undefined ? this.set.skills : this.set.skills.filter((skill) => allowed!.has(skill.name))
  }
}

export default SkillsService
