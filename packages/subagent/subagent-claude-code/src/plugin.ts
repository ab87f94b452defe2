import { existsSync } from 'node:fs'
import { isAbsolute, resolve } from 'node:path'
import type { Context } from 'cordis'
import Schema from 'schemastery'
import type { Agent } from '@dsh/agent'
import {
  NO_CAPABILITIES,
  type SubagentCapabilities,
  mcpServerLookup,
  openConversation,
  startRemoteRun,
  SubagentError,
  type ContinuablePreparation,
  type PrepareContinuableRequest,
  type RemoteChildRecord,
  type RemoteConversation,
  type RemoteSubagentRun,
  type SubagentProvider,
  type SubagentRequest,
} from '@dsh/subagent'
import { delegationName } from '@dsh/approvals'
import type { ApprovalScope } from './approvals.js'
import { claudeSession, ClaudeTransport, isClaudeSessionId } from './session.js'
import { missingClaudeCodePackage, resolveClaudeExecutable } from './executable.js'
import { PERMISSION_MODES, type ClaudeCodeSettings } from './run-spec.js'

/**
 * Claude Code as an out-of-process child: each turn is one `query()` of the Claude Agent
 * SDK, with its own process. No start-time feature is supported (all capabilities
 * `false`), and the child never sees the parent's conversation. Continuable: a child is a
 * Claude Code session persisted in its transcript, resumed by every message. The wire is
 * `session.ts` (connecting) and `turn.ts` (one turn); the lifecycle is `@dsh/subagent`'s.
 */
export class ClaudeCodeProvider implements SubagentProvider {
  readonly capabilities: Readonly<SubagentCapabilities> = Object.freeze({ ...NO_CAPABILITIES, workspace: true })
  readonly inheritsParentContext = false

  /** `liveAgent(id)` finds a parent agent in this process (a resumed child's parent). */
  constructor(
    private readonly settings: ClaudeCodeSettings,
    private readonly liveAgent: (id: string) => Agent | undefined = () => undefined,
  ) {}

  get name(): string {
    return this.settings.providerName
  }

  start(request: SubagentRequest): Promise<RemoteSubagentRun> {
    return startRemoteRun(request, new ClaudeTransport(this.settings, () => request.parent, request.parent.id, request, undefined, this.asker(request.label, request)))
  }

  /**
   * A continuable child is a Claude Code session persisted in its transcript: nothing runs
   * between messages, so preparing one starts nothing (the first message starts the first
   * process).
   */
  async prepareContinuable({ childId, parent, descriptor, request }: PrepareContinuableRequest): Promise<ContinuablePreparation> {
    const model = request.agentOptions?.model
    const session = claudeSession()
    const transport = new ClaudeTransport(this.settings, () => this.liveAgent(parent.id) ?? parent, parent.id, request, session, this.asker(descriptor.label, request, childId))
    return { kind: 'remote', conversation: openConversation(transport, undefined, session.id, resumeDataOf(model, undefined)) }
  }

  /** Reopen a record written by an earlier process: the next message resumes the session by id. */
  async resumeContinuable(record: RemoteChildRecord, signal: AbortSignal): Promise<RemoteConversation> {
    if (signal.aborted) throw new SubagentError('ABORTED', `resuming Claude Code child ${record.childId} was cancelled`, { cause: signal.reason })
    if (!isClaudeSessionId(record.remoteId)) {
      throw new SubagentError('INVALID_REQUEST', `the record of Claude Code child ${record.childId} names session ${JSON.stringify(record.remoteId)}, which is not a Claude Code session id (a UUID); it was not written by this provider`)
    }
    const model = record.resumeData?.model
    const servers = record.resumeData?.mcpServers
    const mcpServers = Array.isArray(servers) && servers.every((name) => typeof name === 'string') ? (servers as string[]) : undefined
    const request = { ...(typeof model === 'string' && { agentOptions: { model } }), ...(mcpServers !== undefined && { mcpServers }) }
    const transport = new ClaudeTransport(this.settings, () => this.liveAgent(record.parentId), record.parentId, request, claudeSession(record.remoteId), this.asker(record.descriptor.label, {}, record.childId))
    return openConversation(transport, undefined, record.remoteId, resumeDataOf(typeof model === 'string' ? model : undefined, mcpServers))
  }

  /** Whose side effects the child's permission asks are, for the parent's approval broker (the parent is added at each turn). */
  private asker(label: string | undefined, request: Pick<SubagentRequest, 'helper' | 'permissions'>, childId?: string): Omit<ApprovalScope, 'parent'> {
    return {
      name: delegationName({ provider: this.name, label, helper: request.helper?.name }),
      ...(request.permissions !== undefined && { levels: request.permissions }),
      ...(childId !== undefined && { childId }),
    }
  }
}

/** Registers a `ClaudeCodeProvider` on `ctx.subagents` under `providerName`. */
export class ClaudeCodePlugin {
  static inject = ['subagents']
  static Config: Schema<ClaudeCodePlugin.Config> = Schema.object({
    providerName: Schema.string().min(1).default('claude-code').description('The name the provider registers under.'),
    env: Schema.dict(Schema.string(), Schema.string().pattern(/^[^=\0]+$/)).default({}).description('Variables added to the child environment (endpoint, key, HOME, CLAUDE_CONFIG_DIR, …); they win over inherited ones.'),
    passEnv: Schema.array(Schema.string().min(1)).default([]).description('Parent variables to pass through beyond the base environment (PATH, HOME, locale, terminal, temp dirs), by exact name.'),
    cwd: Schema.string().min(1).description("The child's working directory; default: the parent session's cwd."),
    permissionMode: Schema.union(PERMISSION_MODES.map((mode) => Schema.const(mode)))
      .default('ask')
      .description("How tool permission asks are answered: ask the parent's approval broker (the default; denied without one), deny every one, or an SDK mode whose leftover asks are denied."),
    model: Schema.string().min(1).description('Claude model name passed to Claude Code (a request\'s agentOptions.model wins).'),
    timeoutMs: Schema.natural().min(1).description('Longest a run may take, start included; it then ends with error.'),
    startTimeoutMs: Schema.natural().min(1).default(60_000).description('Longest the start (up to the init message) may take.'),
    graceMs: Schema.natural().default(2_000).description('Disposal waits this long after closing stdin, and again after SIGTERM, before escalating.'),
    executable: Schema.string().min(1).description('Path of the claude binary; default: the one in the SDK\'s platform package (never PATH).'),
  }) as Schema<ClaudeCodePlugin.Config>

  constructor(ctx: Context, config: ClaudeCodePlugin.Config) {
    const missing = missingClaudeCodePackage()
    if (missing) throw new SubagentError('INVALID_CONFIG', `claude-code: ${missing}`)
    const log = ctx.logger('subagent-claude-code')
    const settings: ClaudeCodeSettings = {
      ...config,
      executable: executableFrom(config.executable),
      progressDropped: (reason) => log.debug('a progress message from Claude Code was dropped: %s', reason),
      approvals: () => ctx.get('approvals'),
      // Read by shape: the MCP client (@dsh/mcp) is composed beside this provider, not a dependency of it.
      mcpServers: mcpServerLookup(ctx),
    }
    ctx.subagents.registerProvider(new ClaudeCodeProvider(settings, (id) => ctx.get('agents')?.get(id)))
  }
}

/** What a continuable child's record keeps for its resume: its model, and its helper's MCP servers by name. */
function resumeDataOf(model: string | undefined, mcpServers: readonly string[] | undefined): Record<string, unknown> {
  return { ...(model !== undefined && { model }), ...(mcpServers !== undefined && mcpServers.length > 0 && { mcpServers: [...mcpServers] }) }
}

/** Known at load, so it fails at load: a missing binary would otherwise surface only on the first delegation. */
function executableFrom(configured: string | undefined): string {
  if (configured !== undefined) {
    const path = isAbsolute(configured) ? configured : resolve(configured)
    if (!existsSync(path)) throw new SubagentError('INVALID_CONFIG', `claude-code: executable ${path} does not exist; fix the \`executable\` key or remove it to use the SDK's bundled binary`)
    return path
  }
  const found = resolveClaudeExecutable()
  if (!found) {
    throw new SubagentError(
      'INVALID_CONFIG',
      `claude-code: no Claude Code binary for ${process.platform}-${process.arch}: the @anthropic-ai/claude-agent-sdk platform package is not installed; reinstall with optional dependencies or set \`executable\``,
    )
  }
  return found
}

export namespace ClaudeCodePlugin {
  /** The settings as configured: the executable may be absent (the SDK's bundled binary). */
  export interface Config extends Omit<ClaudeCodeSettings, 'executable'> {
    executable?: string
  }
}
