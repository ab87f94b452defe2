import type { Context } from 'cordis'
import { errorMessage } from '@dsh/base'
import { isAbsolute } from 'node:path'
import {
  launchRemoteChild,
  NO_CAPABILITIES,
  type SubagentCapabilities,
  mcpServerLookup,
  openConversation,
  startRemoteRun,
  SubagentError,
  type ContinuablePreparation,
  type McpServerLookup,
  type PrepareContinuableRequest,
  type RemoteChildRecord,
  type RemoteConversation,
  type SubagentProvider,
  type SubagentRequest,
  type SubagentRun,
} from '@dsh/subagent'
import type { Agent } from '@dsh/agent'
import { delegationName, type ApprovalService } from '@dsh/approvals'
import { CodexTransport } from './app-server.js'
import { CODEX_CHILD_NAME } from './child.js'
import type { ApprovalScope } from './approvals.js'
import { codexCommand, missingCodexPackage, type CodexCommand } from './codex-binary.js'
import { checkConfig, CodexConfig, resolveRunSpec, type CodexRunSpec } from './config.js'
import { codexMcpConfig } from './mcp-servers.js'

/** What the provider reaches beyond its config; the plugin fills it from its context. */
interface CodexHooks {
  /** Told why a progress notification was dropped; the plugin logs it at debug level. */
  progressDropped?: (reason: string) => void
  /** The parent's approval broker, when one is composed: `permissionMode: ask` puts Codex's approvals to it. */
  approvals?: () => ApprovalService | undefined
  /** A live agent by id: the parent of a continuable child resumed from its record, whose approvals it answers. */
  agent?: (id: string) => Agent | undefined
  /** The parent's MCP client's server of a name (`ctx.mcpServers.resolve`), for a helper's `mcpServers`. */
  mcpServers?: McpServerLookup
}

/**
 * A one-shot OpenAI Codex child: each run is a fresh `codex app-server` process with one
 * ephemeral thread and one turn. Model, provider and credentials come from Codex's own
 * config (`CODEX_HOME`), which the deployment passes through `env`.
 */
export class CodexProvider implements SubagentProvider {
  readonly capabilities: Readonly<SubagentCapabilities> = Object.freeze({ ...NO_CAPABILITIES, workspace: true })
  readonly inheritsParentContext = false
  readonly name: string

  /** `command` replaces the pinned binary: for tests that need a misbehaving server, never for deployments. */
  constructor(
    private readonly config: CodexConfig,
    private readonly command?: CodexCommand,
    private readonly hooks: CodexHooks = {},
  ) {
    this.name = config.providerName
  }

  async start(request: SubagentRequest): Promise<SubagentRun> {
    return startRemoteRun(request, new CodexTransport(this.specOf(request), { kind: 'start', ephemeral: true }, this.approvalScope(request.parent, request.label, request)))
  }

  /**
   * A continuable child is one non-ephemeral thread: the app-server is started and the
   * thread created now (its id is the child's remote id); the process stays for the turns.
   */
  async prepareContinuable({ childId, parent, descriptor, request, signal }: PrepareContinuableRequest): Promise<ContinuablePreparation> {
    const transport = new CodexTransport(this.specOf({ ...request, parent, signal }), { kind: 'start', ephemeral: false }, this.approvalScope(parent, descriptor.label, request, childId))
    // A parent that began disposing while the child started refuses it: the child would outlive it.
    const child = await launchRemoteChild(transport, signal, parent)
    transport.resumeWith(child.threadId)
    return { kind: 'remote', conversation: openConversation(transport, child, child.threadId, resumeDataOf(transport.spec)) }
  }

  /**
   * Reopen a record an earlier process wrote: the app-server is started and the thread
   * reopened with `thread/resume` before this resolves, so a thread Codex cannot find
   * (never materialized, or another CODEX_HOME) fails now, with nothing left running.
   */
  async resumeContinuable(record: RemoteChildRecord, signal: AbortSignal): Promise<RemoteConversation> {
    const cwd = record.resumeData?.cwd
    if (typeof cwd !== 'string' || !isAbsolute(cwd)) {
      throw new SubagentError('INVALID_REQUEST', `the record of Codex child ${record.childId} has no absolute cwd in its resumeData (got ${JSON.stringify(cwd)}); it was not written by this provider`)
    }
    const model = record.resumeData?.model
    const servers = record.resumeData?.mcpServers
    const spec = this.specOf({ cwd, ...(typeof model === 'string' ? { model } : this.config.model !== undefined && { model: this.config.model }), ...(Array.isArray(servers) && servers.every((name) => typeof name === 'string') && { mcpServers: servers as string[] }) })
    // The parent is live (it is the one resuming its child): its broker hears the child's approvals again.
    const parent = this.hooks.agent?.(record.parentId)
    const scope = parent && this.approvalScope(parent, record.descriptor.label, {}, record.childId)
    const conversation = openConversation(new CodexTransport(spec, { kind: 'resume', threadId: record.remoteId }, scope), undefined, record.remoteId, resumeDataOf(spec))
    await conversation.reconnect(signal)
    return conversation
  }

  private specOf(target: Parameters<typeof resolveRunSpec>[1]): CodexRunSpec {
    const spec = resolveRunSpec(this.config, target, this.resolveCommand())
    const helper = 'parent' in target ? target.helper?.name : undefined
    const mcpConfig = codexMcpConfig(spec.mcpServers, this.hooks.mcpServers, helper === undefined ? CODEX_CHILD_NAME : `helper "${helper}" (${CODEX_CHILD_NAME})`)
    if (mcpConfig !== undefined) spec.mcpConfig = mcpConfig
    if (this.hooks.progressDropped) spec.progressDropped = this.hooks.progressDropped
    if (this.hooks.approvals) spec.approvals = this.hooks.approvals
    return spec
  }

  /** Whose side effects the child's approvals are, for the parent's approval broker. */
  private approvalScope(parent: Agent, label: string | undefined, request: Pick<SubagentRequest, 'helper' | 'permissions'>, childId?: string): ApprovalScope {
    const scope: ApprovalScope = { parent, name: delegationName({ provider: this.name, label, helper: request.helper?.name }) }
    if (request.permissions !== undefined) scope.levels = request.permissions
    if (childId !== undefined) scope.childId = childId
    return scope
  }

  private resolveCommand(): CodexCommand {
    try {
      // The package is checked at load (CodexPlugin); its binary is resolved per run, so a broken install fails the delegation, loudly.
      return this.command ?? codexCommand()
    } catch (error) {
      throw new SubagentError('START_FAILED', `${CODEX_CHILD_NAME} could not be started (stage spawn): ${errorMessage(error)}`, { cause: error })
    }
  }
}

/** Provider-owned: where the thread runs, and the model it was asked for. */
function resumeDataOf(spec: CodexRunSpec): Record<string, unknown> {
  return { cwd: spec.cwd, ...(spec.model !== undefined && { model: spec.model }), ...(spec.mcpServers !== undefined && { mcpServers: [...spec.mcpServers] }) }
}

/** Registers a `CodexProvider` on `ctx.subagents` under `providerName`. */
export class CodexPlugin {
  static inject = ['subagents']
  static Config = CodexConfig

  constructor(ctx: Context, config: CodexConfig) {
    checkConfig(config)
    // Known at load, so it fails at load: a composition naming codex without Codex installed never starts.
    const missing = missingCodexPackage()
    if (missing) throw new SubagentError('INVALID_CONFIG', `codex: ${missing}`)
    const log = ctx.logger('subagent-codex')
    ctx.subagents.registerProvider(
      new CodexProvider(config, undefined, {
        progressDropped: (reason) => log.debug('a progress notification from the codex app-server was dropped: %s', reason),
        approvals: () => ctx.get('approvals'),
        agent: (id) => ctx.get('agents')?.get(id),
        // Read by shape: the MCP client (@dsh/mcp) is composed beside this provider, not a dependency of it.
        mcpServers: mcpServerLookup(ctx),
      }),
    )
  }
}
