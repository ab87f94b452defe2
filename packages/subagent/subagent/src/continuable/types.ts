/**
 * The vocabulary of continuable children: a child a parent keeps across turns, sends
 * more work to, hears from when each of its turns settles, and reaches again after a
 * restart. One-shot `start` and `SubagentRun` are untouched by any of this.
 */
import type { Agent } from '@dsh/agent'
import type { TextBlock } from '@dsh/llm'
import type { HelperRef, PermissionLevel, Session } from '@dsh/session'
import type { SubagentRequest } from '../types.js'
import type { ToolFilter } from '@dsh/tools'
import type { ProgressSink, SubagentResult } from '../types.js'

/** The only descriptor version this build reads and writes. */
export const DESCRIPTOR_VERSION = 1

/**
 * What a continuable child is, durably: enough to rebuild it from its record alone.
 * Explicit fields only (never a whole options object); depth is not here, the child's
 * session header is authoritative for it.
 */
export interface ContinuableDescriptor {
  version: typeof DESCRIPTOR_VERSION
  mode: 'continuable'
  /** The provider that created the child (`spawn`, `fork`, `acp`, …). */
  provider: string
  label: string
  /** The child's model spec (`adapter:model`), when one was chosen for it or its parent had one. */
  model?: string
  persona?: string
  toolFilter?: ToolFilter
  /**
   * A remote child only: the conversation to reopen (`RemoteConversation.remoteId`) and
   * the provider's own `resumeData`. Written once the conversation exists; absent from
   * the descriptor a provider is given in `prepareContinuable`.
   */
  remote?: { remoteId: string; resumeData?: Record<string, unknown> }
}

/** The work of a continuable start: a one-shot request without label, signal and output schema. */
export interface ContinuableRequest {
  prompt: TextBlock[]
  parent: Agent
  /** The parent's tool call that asked for the child: recorded as the header's `toolCallId`. */
  callId?: string
  agentOptions?: { model?: string }
  /** Absolute depth bound (needs `depthLimit`). */
  maxDepth?: number
  /** Needs `toolFilter`. */
  toolFilter?: ToolFilter
  /** Needs `persona`. */
  persona?: string
  /** The agent definition it is started from, recorded in an in-process child's header (`SubagentRequest.helper`). */
  helper?: HelperRef
  /** See `SubagentRequest.permissions`. */
  permissions?: readonly PermissionLevel[]
  /** Set by the service (see `SubagentRequest.approvalDefault`). */
  approvalDefault?: SubagentRequest['approvalDefault']
  /** See `SubagentRequest.budget`: over all its turns and every descendant it starts. */
  budget?: SubagentRequest['budget']
  /** See `SubagentRequest.workspace`: a continuable child keeps its workspace across turns and restarts, until its parent merges or discards it. */
  workspace?: SubagentRequest['workspace']
  /** See `SubagentRequest.sandbox`. */
  sandbox?: SubagentRequest['sandbox']
  /** Set by the service (see `SubagentRequest.workingDirectory`). */
  workingDirectory?: SubagentRequest['workingDirectory']
}

export interface StartContinuableOptions {
  provider: string
  label: string
  /** A caller-reserved id; must not be live or stored (`DUPLICATE_CHILD`). Default: a fresh session id. */
  childId?: string
  request: ContinuableRequest
  /** Governs only until the child's inbox has accepted the first prompt. */
  signal: AbortSignal
}

/** `startContinuable` resolves once the child has accepted its first prompt. */
export interface ContinuableStarted {
  childId: string
  /** Identifies the accepted message (acceptance, not a read receipt). */
  messageId: string
}

/** What the manager asks a provider when it creates a continuable child. */
export interface PrepareContinuableRequest {
  /** The child's id, chosen before the provider is asked (the caller's reserved one, else a fresh session id); an in-process child's session id, a remote child's record id. */
  childId: string
  parent: Agent
  descriptor: Readonly<ContinuableDescriptor>
  request: ContinuableRequest
  /** Aborting it makes the provider roll back whatever it made and reject. */
  signal: AbortSignal
}

/**
 * A provider's part in a continuable start. In process the provider gives data only (a
 * fork's seed); the manager creates, drives and cold-resumes the agent itself. A remote
 * provider returns an open conversation in another process.
 */
export type ContinuablePreparation =
  | { kind: 'in-process'; seed?: { session: Session; length: number } }
  | { kind: 'remote'; conversation: RemoteConversation }

/**
 * An open conversation with a child in another process (an ACP session, a Codex thread,
 * …). The manager sends at most one message at a time (it queues the rest, FIFO).
 */
export interface RemoteConversation {
  /** The remote side's own stable id (the ACP session id, …): the key to reopen it. */
  readonly remoteId: string
  /**
   * Provider-owned JSON the provider needs to reopen this conversation after a restart
   * (e.g. the command it ran); stored verbatim in the parent-side record.
   */
  readonly resumeData?: Readonly<Record<string, unknown>>
  /** The child's pid, when it is a local process. */
  readonly pid?: number
  /**
   * Run one turn: deliver `message`, resolve with that turn's result. Child-level
   * failures (crash, garbage, timeout) resolve with a non-`completed` stop reason and a
   * diagnostic; a cancelled turn resolves `aborted`. Never rejects for a turn failure.
   * `progress`, when given, receives the turn's live progress (absent: nobody listens).
   */
  send(message: TextBlock[], progress?: ProgressSink): Promise<SubagentResult>
  /** Stop the running turn (its `send` resolves `aborted`); the conversation stays open. */
  cancel(reason?: unknown): void
  /** Close the conversation and stop its process; idempotent; resolves once it is gone. */
  dispose(): Promise<void>
}

/**
 * The parent-side durable record of a remote continuable child: what authority, listing
 * and cold resume need after a restart.
 */
export interface RemoteChildRecord {
  childId: string
  /** The direct parent's session id: the only agent that may deliver to the child. */
  parentId: string
  depth: number
  remoteId: string
  descriptor: Readonly<ContinuableDescriptor>
  resumeData?: Readonly<Record<string, unknown>>
}

/** How a continuable child stands, as listed. */
export type ContinuableChildState = 'running' | 'idle'

export interface ContinuableChildInfo {
  childId: string
  parentId: string
  /** 1 for a direct child of the listing root, 2 for a grandchild, … */
  depth: number
  provider: string
  label: string
  state: ContinuableChildState
  /** Turns the child has taken (its own, not a fork seed's). */
  turns: number
  /** True when the child runs in this process (in memory or resumable from its session). */
  local: boolean
}

/** Who asks for an interrupt: the user for a root's direct child, or an ancestor agent. */
export type InterruptAuthority = { kind: 'user'; parentSessionId: string } | { kind: 'ancestor'; agent: Agent }
