/**
 * Connecting to Claude Code: the provider's connection file. Claude Code keeps a
 * conversation in its own transcript (under `CLAUDE_CONFIG_DIR`), not in a process: each
 * turn is one `query()` of the Agent SDK with a process of its own, and a continuable
 * child's next turn resumes the session by id, in this dsh process or a later one.
 *
 * So a child here is one query's process (`ClaudeChild`): made at once, started by its
 * turn (`turn.ts`), done when its turn is. Connecting has nothing to wait for; the start a
 * one-shot run (or each turn of a continuable child) races is the turn's, up to Claude
 * Code's `system/init` message (`startsPerTurn`).
 */
import { randomUUID } from 'node:crypto'
import { createRequire } from 'node:module'
import type { Options, Query } from '@anthropic-ai/claude-agent-sdk'
import type { Agent } from '@dsh/agent'
import type { TextBlock } from '@dsh/llm'
import { refuseDisposedParent, SubagentError, type RemoteChild, type RemoteConnection, type RemoteProcess, type RemoteSubagentRun, type RemoteTransport, type SubagentRequest, type TurnControl } from '@dsh/subagent'
import { describeExit as describeTreeExit } from '@dsh/process'
import { ClaudeProcess } from './claude-process.js'
import type { ApprovalScope } from './approvals.js'
import { resolveRunSpec, type ClaudeCodeRunSpec, type ClaudeCodeSettings } from './run-spec.js'
import { ClaudeCodeTurn } from './turn.js'

export const CLAUDE_CHILD_NAME = 'Claude Code'

type AgentSdk = typeof import('@anthropic-ai/claude-agent-sdk')
let agentSdk: AgentSdk | undefined

/**
 * The Agent SDK, loaded at the first run: it is an optional peer, so this package loads
 * without it and the plugin says at start-up what to install (`missingClaudeCodePackage`).
 */
function query(params: Parameters<AgentSdk['query']>[0]): Query {
  agentSdk ??= createRequire(import.meta.url)('@anthropic-ai/claude-agent-sdk') as AgentSdk
  return agentSdk.query(params)
}

/** Claude Code session ids are UUIDs (`options.sessionId` must be one). */
const SESSION_ID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i

export function isClaudeSessionId(id: string): boolean {
  return SESSION_ID.test(id)
}

/**
 * A continuable child's session: its id, chosen here (a UUID) and given to the first turn
 * as `sessionId`, and whether Claude Code has created it (every later turn passes it as
 * `resume`). A first turn that fails before Claude Code created the session leaves the
 * next turn to create it.
 */
export interface ClaudeSession {
  readonly id: string
  created: boolean
}

/** The process of one query. */
export class ClaudeChild implements RemoteChild {
  readonly claude = new ClaudeProcess()
  readonly process: RemoteProcess
  /** Claude Code's session id, from its `system/init` message. */
  remoteId: string | undefined
  private readonly abort = new AbortController()
  private query: Query | undefined
  /** Its one query has started: the next turn needs another child. */
  private used = false

  constructor(readonly spec: ClaudeCodeRunSpec) {
    const { claude } = this
    this.process = {
      // Once the query has ended its process is no one's to signal.
      get pid() {
        return claude.exit ? undefined : claude.pid
      },
      exited: () => claude.exited(),
      stderr: () => claude.stderrTail(),
      howItEnded: () => {
        const exit = claude.exit
        if (!exit) return 'stopped answering'
        return exit.spawnError ? `could not be started: ${exit.spawnError.message}` : describeTreeExit(exit)
      },
    }
  }

  /** The query of this child's one turn; `onSpawn` hears when the SDK spawns its process. */
  start(prompt: string, options: Options, onSpawn: () => void): Query {
    // One query per child: the next turn starts a new process.
    this.used = true
    this.query = query({
      prompt,
      options: {
        ...options,
        abortController: this.abort,
        spawnClaudeCodeProcess: (spawnOptions) => {
          const child = this.claude.spawn(spawnOptions)
          onSpawn()
          return child
        },
      },
    })
    return this.query
  }

  /** Whether it can take a turn: it has not run its query (nor been closed). */
  async running(): Promise<boolean> {
    return !this.used
  }

  /** Close the query and reap the process tree. Idempotent. */
  async close(): Promise<void> {
    this.used = true
    this.abort.abort()
    try {
      this.query?.close()
    } catch {
      // close() on an already-ended query has nothing left to close.
    }
    await this.claude.dispose(this.spec.graceMs)
  }
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
    /** What every turn asks for (a continuable request's model). */
    private readonly request: Pick<SubagentRequest, 'agentOptions' | 'callId'>,
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
