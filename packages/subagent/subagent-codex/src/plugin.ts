import type { Context } from 'cordis'
import { errorMessage } from '@dsh/base'
import { NO_CAPABILITIES, refuseUnstartable, SubagentError, type SubagentProvider, type SubagentRequest, type SubagentRun } from '@dsh/subagent'
import { codexCommand, type CodexCommand } from './codex-binary.js'
import { CODEX_CHILD_NAME, startCodexRun } from './codex-run.js'
import { checkConfig, CodexConfig, resolveRunSpec } from './config.js'

/**
 * A one-shot OpenAI Codex child: each run is a fresh `codex app-server` process with one
 * ephemeral thread and one turn. Model, provider and credentials come from Codex's own
 * config (`CODEX_HOME`), which the deployment passes through `env`.
 */
export class CodexProvider implements SubagentProvider {
  readonly capabilities = NO_CAPABILITIES
  readonly inheritsParentContext = false
  readonly name: string

  /** `command` replaces the pinned binary: for tests that need a misbehaving server, never for deployments. */
  constructor(private readonly config: CodexConfig, private readonly command?: CodexCommand) {
    this.name = config.providerName
  }

  async start(request: SubagentRequest): Promise<SubagentRun> {
    refuseUnstartable(request, CODEX_CHILD_NAME)
    let command: CodexCommand
    try {
      // Resolved per run, so a missing binary fails the delegation, loudly, not the plugin load.
      command = this.command ?? codexCommand()
    } catch (error) {
      throw new SubagentError('START_FAILED', `${CODEX_CHILD_NAME} could not be started (stage spawn): ${errorMessage(error)}`, { cause: error })
    }
    return startCodexRun(resolveRunSpec(this.config, request, command), request)
  }
}

/** Registers a `CodexProvider` on `ctx.subagents` under `providerName`. */
export class CodexPlugin {
  static inject = ['subagents']
  static Config = CodexConfig

  constructor(ctx: Context, config: CodexConfig) {
    checkConfig(config)
    ctx.subagents.registerProvider(new CodexProvider(config))
  }
}
