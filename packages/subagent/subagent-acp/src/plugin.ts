import { isAbsolute, resolve } from 'node:path'
import type { Context } from 'cordis'
import type { LoadSessionRequest, NewSessionRequest } from '@agentclientprotocol/sdk'
import type { RecordingLink } from '@dsh/llm'
import {
  ACP_LINEAGE,
  launchRemoteChild,
  lineageOf,
  NO_CAPABILITIES,
  openConversation,
  startRemoteRun,
  SubagentError,
  type ContinuablePreparation,
  type Lineage,
  type PrepareContinuableRequest,
  type RemoteChildRecord,
  type RemoteConversation,
  type SubagentCapabilities,
  type SubagentProvider,
  type SubagentRequest,
  type SubagentRun,
} from '@dsh/subagent'
import { AcpProviderConfig, resolveAcpSpec, withRecordingGrant, type AcpRunSpec } from './config.js'
import { AcpTransport } from './connection.js'
import { refuseOversizedPrompt } from './frame-limit.js'
import type { ApprovalScope } from './permission.js'
import { delegationName } from '@dsh/approvals'
import type { Agent } from '@dsh/agent'
import { resolveMcpServers, type McpServerEntry, type McpServerTable } from './mcp-servers.js'

/**
 * Of the start-time features only the depth bound: it is checked before anything is
 * spawned, and travels in `_meta.dsh` so a dsh child applies it to its own children.
 */
export const ACP_CAPABILITIES: Readonly<SubagentCapabilities> = Object.freeze({ ...NO_CAPABILITIES, depthLimit: true, workspace: true })

/**
 * An ACP agent process per delegation. Out of process: no local agent, and the child
 * never sees the parent's conversation. Continuable when the agent advertises
 * `loadSession`: the session stays open while the process lives, and is reopened with
 * `session/load` in a new process after a restart. The wire is `connection.ts` (connecting)
 * and `turn.ts` (one turn); the lifecycle is `@dsh/subagent`'s.
 */
export class AcpProvider implements SubagentProvider {
  readonly capabilities = ACP_CAPABILITIES
  readonly inheritsParentContext = false

  constructor(readonly name: string, private readonly spec: AcpRunSpec) {}

  start(request: SubagentRequest): Promise<SubagentRun> {
    const { spec, cwd, lineage } = this.prepare(request, request.label, request.maxDepth)
    const servers = this.mcpServersOf(request.mcpServers)
    return startRemoteRun(request, new AcpTransport(spec, cwd, { kind: 'new', request: newSessionRequest(cwd, lineage), continuable: false, servers }, this.approvalScope(request.parent, request.label, request)))
  }

  async prepareContinuable({ childId, parent, descriptor, request, signal }: PrepareContinuableRequest): Promise<ContinuablePreparation> {
    const { spec, cwd, lineage } = this.prepare({ ...request, parent }, descriptor.label, request.maxDepth)
    // ContinuableRequest has no mcpServers yet (@dsh/subagent): read by shape, so the helper's names arrive once it carries them.
    const servers = this.mcpServersOf((request as { mcpServers?: readonly string[] }).mcpServers)
    const transport = new AcpTransport(spec, cwd, { kind: 'new', request: newSessionRequest(cwd, lineage), continuable: true, servers }, { ...this.approvalScope(parent, descriptor.label, request), child: childId })
    // A parent that began disposing while the child started refuses it: the child would outlive it.
    const child = await launchRemoteChild(transport, signal, parent)
    const sessionId = child.remoteId!
    transport.reopenWith(loadSessionRequest(sessionId, cwd, lineage))
    // The names only (never an entry's values): a resumed child's servers are resolved again from the config then.
    return { kind: 'remote', conversation: openConversation(transport, child, sessionId, { cwd, ...(servers.length > 0 && { mcpServers: servers.map((server) => server.name) }) }) }
  }

  /**
   * Reopen a record an earlier process wrote: the agent is started again and the session
   * reloaded with `session/load`, all before this resolves (a child that cannot come back
   * says so now, with nothing left running).
   */
  async resumeContinuable(record: RemoteChildRecord, signal: AbortSignal): Promise<RemoteConversation> {
    const cwd = record.resumeData?.cwd
    if (typeof cwd !== 'string' || !isAbsolute(cwd)) {
      throw new SubagentError('INVALID_REQUEST', `the record of ACP child ${record.childId} has no absolute cwd in its resumeData (got ${JSON.stringify(cwd)}); it was not written by this provider`)
    }
    const lineage = { parentSession: record.parentId, delegationDepth: record.depth, provider: this.name }
    // The parent is live (it is the one resuming its child): its broker hears the child's requests again.
    const parent = this.spec.agent?.(record.parentId)
    const scope = parent && { ...this.approvalScope(parent, record.descriptor.label, {}), child: record.childId }
    const names = record.resumeData?.mcpServers
    const servers = this.mcpServersOf(Array.isArray(names) ? names.filter((name): name is string => typeof name === 'string') : undefined)
    const resumeData = { cwd, ...(servers.length > 0 && { mcpServers: servers.map((server) => server.name) }) }
    const conversation = openConversation(new AcpTransport(this.spec, cwd, { kind: 'load', request: loadSessionRequest(record.remoteId, cwd, lineage), servers }, scope), undefined, record.remoteId, resumeData)
    await conversation.reconnect(signal)
    return conversation
  }

  /** The entries of the MCP servers a delegation names, as this process's config has them (warnings for the rest). */
  private mcpServersOf(names: readonly string[] | undefined): McpServerEntry[] {
    if (names === undefined || names.length === 0) return []
    return resolveMcpServers(names, this.spec.mcpServers?.(), (line) => this.spec.warn?.(line))
  }

  /** Whose side effects the child's permission requests are, for the parent's approval broker. */
  private approvalScope(parent: Agent, label: string | undefined, request: Pick<SubagentRequest, 'helper' | 'permissions'>): ApprovalScope {
    const scope: ApprovalScope = { parent, name: delegationName({ provider: this.name, label, helper: request.helper?.name }) }
    if (request.permissions !== undefined) scope.levels = request.permissions
    return scope
  }

  /** What a start checks before anything is spawned, and what it sends: the cwd, the recording grant and link, the lineage. */
  private prepare(request: Pick<SubagentRequest, 'parent' | 'prompt' | 'agentOptions' | 'callId' | 'permissions' | 'budget' | 'workingDirectory' | 'helper'>, label: string | undefined, maxDepth: number | undefined): { spec: AcpRunSpec; cwd: string; lineage: Lineage } {
    if (request.agentOptions?.model !== undefined) {
      throw new SubagentError(
        'INVALID_REQUEST',
        `the "${this.name}" subagent provider cannot choose the model of an ACP agent (asked for "${request.agentOptions.model}"); choose it in the provider's command or args (e.g. dsh acp --model SPEC) and drop agentOptions.model`,
      )
    }
    // The agent would refuse the prompt's frame: say so before anything is spawned.
    refuseOversizedPrompt(this.name, request.prompt, this.spec.maxFrameBytes)
    // A workspace of its own (the service made it) wins; then the configured cwd; then the parent's.
    const cwd = request.workingDirectory?.cwd ?? this.spec.cwd ?? resolve(request.parent.session.header.cwd)
    // The parent records or replays its model calls: the child does the same with its own.
    const recording: RecordingLink | undefined = this.spec.recordingLink?.(request.parent.id, request.callId)
    const lineage: Lineage = lineageOf({ parent: request.parent, label, callId: request.callId, permissions: request.permissions, budget: request.budget }, this.name, maxDepth)
    if (recording !== undefined) lineage.recording = recording
    const spec = { ...withRecordingGrant(this.spec, recording) }
    // Who the descendants a dsh acp child names are below: this child, started by this parent's call.
    const told = this.spec.descendantBelow
    if (told !== undefined) spec.descendant = (info) => told({ ...info, parentId: request.parent.id, provider: this.name, ...(label !== undefined && { label }), ...(request.helper !== undefined && { childHelper: request.helper.name }), ...(request.callId !== undefined && { callId: request.callId }) })
    return { spec, cwd, lineage }
  }
}

/**
 * `session/new` with the delegation's lineage in `_meta.dsh`. Another dsh (`dsh acp`)
 * records it in the child session's header, so session trees and the depth bound reach
 * across the process boundary; other agents ignore `_meta` they do not know.
 */
function newSessionRequest(cwd: string, lineage: Lineage): NewSessionRequest {
  return { cwd, mcpServers: [], _meta: ACP_LINEAGE.carry(lineage) }
}

/** `session/load` of a continuable child's session; its lineage lets a dsh child check it is reopened by its own parent. */
function loadSessionRequest(sessionId: string, cwd: string, lineage: Pick<Lineage, 'parentSession' | 'delegationDepth' | 'provider'>): LoadSessionRequest {
  const { parentSession, delegationDepth, provider } = lineage
  return { sessionId, cwd, mcpServers: [], _meta: ACP_LINEAGE.carry({ parentSession, delegationDepth, provider }) }
}

/** Registers an `AcpProvider` on `ctx.subagents` under `providerName`. */
export class AcpPlugin {
  static inject = ['subagents']
  static Config = AcpProviderConfig

  constructor(ctx: Context, config: AcpProviderConfig) {
    const log = ctx.logger('subagent-acp')
    ctx.subagents.registerProvider(
      new AcpProvider(config.providerName, {
        ...resolveAcpSpec(config),
        recordingLink: (parent, callId) => ctx.get('llm')?.childRecordingLink(parent, callId),
        approvals: () => ctx.get('approvals'),
        bash: () => ctx.get('bash'),
        agent: (id) => ctx.get('agents')?.get(id),
        // By shape: @dsh/mcp's table of configured servers, when a config composes it.
        mcpServers: () => ctx.get('mcpServers') as McpServerTable | undefined,
        warn: (line) => log.warn(line),
        progressDropped: (reason) => log.debug('a progress update from the ACP agent was dropped: %s', reason),
        // Heard by name (the hooks plugin fires SubagentStart/SubagentStop from it): not an event of @dsh/subagent's.
        descendantBelow: (info) => (ctx.emit as unknown as (event: string, info: unknown) => void)('subagent/descendant', info),
      }),
    )
  }
}
