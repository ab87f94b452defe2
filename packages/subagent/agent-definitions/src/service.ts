import { Context, Service } from 'cordis'
import Schema from 'schemastery'
import { loadDefinitions, type DefinitionDirs } from './discover.js'
import type { AgentDefinition, DefinitionSet } from './types.js'

declare module 'cordis' {
  interface Context {
    agentDefinitions: AgentDefinitionsService
  }
}

export interface AgentDefinitionsConfig {
  dirs: string[]
  project: boolean
  user: boolean
  claudeCode: boolean
  cwd?: string
  home?: string
  /** Let a project's definitions name a scripted or replay model (see `projectScriptedModels` below). */
  projectScriptedModels: boolean
}

/**
 * `ctx.agentDefinitions`: the helpers defined in files, read once when the plugin starts
 * (a change on disk applies to the next composition). A bad file fails the start, so a
 * composition either has every definition or none.
 */
export class AgentDefinitionsService extends Service {
  static Config: Schema<AgentDefinitionsConfig> = Schema.object({
    dirs: Schema.array(Schema.string().min(1)).default([]).description('More directories of definitions (relative to the config file); each must exist.'),
    project: Schema.boolean().default(true).description('Read ./.dsh/agents (wins over every other directory on a name clash).'),
    user: Schema.boolean().default(true).description('Read ~/.dsh/agents ($DSH_HOME/agents).'),
    claudeCode: Schema.boolean().default(false).description("Read ./.claude/agents as Claude Code agent files (unmapped fields and tools are notes)."),
    cwd: Schema.string().min(1).description('The project directory (default: where dsh runs).'),
    home: Schema.string().min(1).description("dsh's home (default: $DSH_HOME, else ~/.dsh)."),
    projectScriptedModels: Schema.boolean()
      .default(false)
      .description("Let a project's definitions (./.dsh/agents, ./.claude/agents) name a scripted: or replay: model, whose answers are files the project's author wrote."),
  })

  private readonly set: DefinitionSet

  /**
   * Whether the user's config lets a project's definitions name a scripted or replay
   * model. Off by default: such a model's answers are files of the project, so its author
   * would choose what the helper does. `definitionProblems` refuses one otherwise.
   */
  readonly projectScriptedModels: boolean

  constructor(ctx: Context, config: Partial<AgentDefinitionsConfig> = {}) {
    super(ctx, 'agentDefinitions')
    const dirs: DefinitionDirs = {}
    if (config.dirs) dirs.dirs = config.dirs
    if (config.project !== undefined) dirs.project = config.project
    if (config.user !== undefined) dirs.user = config.user
    if (config.claudeCode !== undefined) dirs.claudeCode = config.claudeCode
    if (config.cwd !== undefined) dirs.cwd = config.cwd
    if (config.home !== undefined) dirs.home = config.home
    // Synchronous on purpose: a handful of small files, and every consumer can rely on
    // the set being complete the moment the service exists.
    this.set = loadDefinitions(dirs)
    this.projectScriptedModels = config.projectScriptedModels === true
    // Said at every start (held with the rest of start-up's lines): a rule the user may
    // rely on is not applied, and each line says what to change.
    const log = ctx.logger('agent-definitions')
    for (const warning of this.set.warnings) log.warn('%s', warning)
  }

  /** Every definition, in a stable order (directory, then file name). */
  list(): readonly AgentDefinition[] {
    return this.set.definitions
  }

  get(name: string): AgentDefinition | undefined {
    return this.set.definitions.find((definition) => definition.name === name)
  }

  /** Shadowed names, unmapped Claude Code fields and the warnings, one line each. */
  get notes(): readonly string[] {
    return this.set.notes
  }

  /** What a used definition asked for and does not get, one line each with what to change (logged at start). */
  get warnings(): readonly string[] {
    return this.set.warnings
  }
}

export default AgentDefinitionsService
