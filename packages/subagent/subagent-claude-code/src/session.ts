/**
 * Connecting to Claude Code: the provider's connection file. Claude Code keeps a
 * conversation in its own transcript (under `CLAUDE_CONFIG_DIR`), not in a process: each
 * turn is one `query()` of the Agent SDK with a process of its own, and a continuable
 * child's next turn resumes the session by id, in this dsh process or a later one.
 *
 * So a child here is one query's process (`ClaudeChild`, `child.ts`): made at once,
 * started by its turn (`turn.ts`), done when its turn is. Connecting has nothing to wait
 * for; the start a one-shot run (or each turn of a continuable child) races is the
 * turn's, up to Claude Code's `system/init` message (`startsPerTurn`).
 */
import { randomUUID } from 'node:crypto'
import type { Agent } from '@dsh/agent'
import type { TextBlock } from '@dsh/llm'
import { refuseDisposedParent, SubagentError, type RemoteConnection, type RemoteSubagentRun, type RemoteTransport, type SubagentRequest, type TurnControl } from '@dsh/subagent'
import type { ApprovalScope } from './approvals.js'
import { ClaudeChild, type ClaudeSession } from './child.js'
import { resolveRunSpec, type ClaudeCodeSettings } from './run-spec.js'
import { claudeMcpServers } from './mcp-servers.js'
import { ClaudeCodeTurn } from './turn.js'

const CLAUDE_CHILD_NAME = 'Claude Code'

/** Claude Code session ids are UUIDs (`options.sessionId` must be one). */
const SESSION_ID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i

export function isClaudeSessionId(id: string): boolean {
  return SESSION_ID.test(id)
}

/**
 * The Claude Code wire for `@dsh/subagent`'s remote lifecycle: a one-shot run's (nothing
 * persisted) or a continuable conversation's (one session resumed by every turn).
 */
export class ClaudeTransport implements RemoteTransport<ClaudeChild> {
  readonly childName = CLAUDE_CHILD_NAME
  readonly cancelGraceKey = 'graceMs'
  readonly startupTimeoutKey = 'startTimeoutMs'
  /** `timeoutMs` bounds the whole run, start included. */
  readonly timeoutIncludesStartup = true
  readonly startsPerTurn = true
  readonly initialStage = 'query'
  readonly turnStage = 'query'

  constructor(
    private readonly settings: ClaudeCodeSettings,
    /** The parent agent, looked up at each turn: a continuable child's turn runs in its cwd and is refused once it is gone. */
    private readonly parent: () => Agent | undefined,
    private readonly parentId: string,
    /** What every turn asks for (a continuable request's model and its helper's MCP servers). */
    private readonly request: Pick<SubagentRequest, 'agentOptions' | 'callId' | 'mcpServers' | 'helper'>,
    /** A continuable child's session; absent for a one-shot run. */
    readonly session?: ClaudeSession,
    /** Whose side effects the turns' permission asks are, for the parent's broker (the parent is the one found at each turn). */
    private readonly asker?: Omit<ApprovalScope, 'parent'>,
  ) {}

  get provider(): string {
    return this.settings.providerName
  }

  get startupTimeoutMs(): number {
    return this.settings.startTimeoutMs
  }

  get cancelGraceMs(): number {
    return this.settings.graceMs
  }

  get timeoutMs(): number | undefined {
    return this.settings.timeoutMs
  }

  get conversationName(): string {
    return `Claude Code session ${this.session?.id ?? '(one-shot)'}`
  }

  storedAt(): string {
    return this.session ? 'Claude Code\'s own session store' : 'nowhere: a one-shot Claude Code session is not persisted'
  }

  /** A turn for a parent that is not live here (a resumed record's, from another process) is refused before anything starts. */
  refuse(): string | undefined {
    const parent = this.parent()
    if (!parent) return `the parent agent ${this.parentId} of ${this.conversationName} is not live in this process; deliver the message from the parent`
    try {
      refuseDisposedParent(parent)
      return undefined
    } catch (error) {
      return (error as Error).message
    }
  }

  connect(): RemoteConnection<ClaudeChild> {
    const parent = this.parent()
    if (!parent) throw new SubagentError('START_FAILED', `${CLAUDE_CHILD_NAME} could not be started: the parent agent ${this.parentId} is not live in this process`)
    const spec = resolveRunSpec(this.settings, { parent, agentOptions: this.request.agentOptions, callId: this.request.callId })
    if (this.session) spec.session = { id: this.session.id, resume: this.session.created }
    if (this.asker) spec.approvalScope = { ...this.asker, parent }
    const helper = this.request.helper?.name
    const mcpServers = claudeMcpServers(this.request.mcpServers, this.settings.mcpServers, helper === undefined ? CLAUDE_CHILD_NAME : `helper "${helper}" (${CLAUDE_CHILD_NAME})`)
    if (mcpServers !== undefined) spec.mcpServers = mcpServers
    return { child: new ClaudeChild(spec), opened: Promise.resolve() }
  }

  openTurn(message: TextBlock[], control: TurnControl): ClaudeCodeTurn {
    return new ClaudeCodeTurn(message, control, this.session, this.settings.progressDropped)
  }

  startFailed(message: string, stage: string): SubagentError {
    return new SubagentError('START_FAILED', `${CLAUDE_CHILD_NAME} could not be started (stage ${stage}): ${message}`)
  }
}

/** A new continuable session (its id chosen now), or one a record names. */
export function claudeSession(resume?: string): ClaudeSession {
  return resume === undefined ? { id: randomUUID(), created: false } : { id: resume, created: true }
}

/** A Claude Code run: `remoteId` is Claude Code's own session id (from `system/init`), `pid` its process group. */
export type ClaudeCodeRun = RemoteSubagentRun
