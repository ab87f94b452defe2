import type { TextBlock } from '@dsh/llm'
import type { Agent } from '@dsh/agent'
import type { ToolFilter } from '@dsh/tools'
import type { DelegationBudget, HelperRef, PermissionLevel, WorkspaceRef } from '@dsh/session'
import type { ContinuablePreparation, PrepareContinuableRequest, RemoteChildRecord, RemoteConversation } from './continuable/types.js'

/** How a run ended. Consumers treat any value they do not know as a failure. */
export type { StopReason } from '@dsh/base'
import type { StopReason } from '@dsh/base'

/** Start-time features a provider may support; checked before any child exists. */
export interface SubagentCapabilities {
  /** `request.outputSchema`: the child returns validated structured output. */
  outputSchema: boolean
  /** `request.maxDepth`: an absolute bound on delegation depth. */
  depthLimit: boolean
  /** `request.toolFilter`: allow/deny the child's tools. */
  toolFilter: boolean
  /** `request.persona`: replace the deployment persona for the child. */
  persona: boolean
  /**
   * `request.workspace` other than `shared`: the child works in the directory the parent
   * gives it (a worktree or copy of its own), on this host.
   */
  workspace: boolean
  /** `request.sandbox`: the child's commands run confined (its own bash tool honours its header's `sandbox`). */
  sandbox: boolean
}

export type SubagentFeature = keyof SubagentCapabilities

export interface SubagentRequest {
  /** The delegated task, as content blocks. */
  prompt: TextBlock[]
  /** The delegating agent. */
  parent: Agent
  /** The one cancellation channel: before publication it makes `start` reject, after it the run ends `aborted`. */
  signal: AbortSignal
  /** A short human label (the delegation's description). */
  label?: string
  /**
   * The parent's tool call that asked for this child, when a tool did. An in-process child
   * records it in its session header (`toolCallId`), naming it stably across runs.
   */
  callId?: string
  agentOptions?: { model?: string }
  /** JSON Schema the child's structured output must satisfy (needs `outputSchema`). */
  outputSchema?: Record<string, unknown>
  /** Absolute depth bound: 0 forbids any delegation, 1 lets a root delegate but not its children (needs `depthLimit`). */
  maxDepth?: number
  /** Needs `toolFilter`. */
  toolFilter?: ToolFilter
  /** Needs `persona`. */
  persona?: string
  /**
   * The MCP servers the child gets, by name (a helper definition's `mcpServers:`). An
   * in-process child's are chosen by its tool filter; a provider whose child is another
   * program hands it each server as its own config resolves the name (a queue job carries
   * the names, which its worker resolves). Never a command: only names travel.
   */
  mcpServers?: readonly string[]
  /**
   * The agent definition this child is started from (`@dsh/agent-definitions`): an
   * in-process child records it in its session header (`helper`). Descriptive only.
   */
  helper?: HelperRef
  /**
   * The caller's own observer of this run's live progress, coalesced like the
   * `subagent/progress` event (which it receives alongside). A throw is contained.
   */
  onProgress?: (info: SubagentProgressInfo) => void
  /**
   * What this child and its descendants may use together; at a limit the child is stopped
   * and its result ends `error` naming the budget. A tree's own budget (`tree.budget` of
   * `ctx.subagents`) holds beside it, so a child never gets more than its tree has left.
   */
  budget?: ChildBudget
  /**
   * Permission levels this child is under beyond its parent's: its helper definition's
   * rules (the delegation tool sets them), and its process's own (`ctx.subagents` adds
   * `ctx.approvals`' configured rules when it starts the child). They travel with the
   * lineage, so a child anywhere is under every ancestor's rules (see `@dsh/approvals`).
   */
  permissions?: readonly PermissionLevel[]
  /**
   * What the parent's approval broker decides with nobody to ask, for the parent's tree
   * (the lineage field `approvalDefault`). Set by `ctx.subagents` when a broker is composed,
   * which replaces a caller's own; without a broker the service sends none on.
   */
  approvalDefault?: 'allow' | 'reject'
  /**
   * Where the child works: in its parent's directory (`shared`, the default), or in a
   * workspace of its own made before it starts (`worktree`, `copy`: needs `workspace`, and
   * `ctx.workspaces`); its result then carries what it changed (`SubagentResult.workspace`).
   */
  workspace?: 'shared' | 'worktree' | 'copy'
  /**
   * Confine the child's commands (bubblewrap): its working directory writable, the rest of
   * the file system read-only, and no network with `'no-network'` (needs `sandbox`).
   */
  sandbox?: boolean | 'no-network'
  /**
   * Set by the service, read by providers: the directory the child works in and its
   * workspace, when it has one of its own (`request.workspace`). A caller's own value is
   * ignored.
   */
  workingDirectory?: { cwd: string; workspace?: WorkspaceRef }
  /**
   * Told when this delegation has to wait for a slot of its tree's cap (`true`, before
   * `start` returns) and when it stops waiting (`false`: it starts, or was cancelled).
   * Never called when it starts at once.
   */
  onWait?: (waiting: boolean) => void
  /**
   * Set by the service, read by providers: where a provider reports its child's live
   * progress. Absent when nobody listens, so a provider builds nothing
   * (`request.progress?.report(…)`). A caller's own value is ignored.
   */
  progress?: ProgressSink
}

/**
 * A child's budget (`SubagentRequest.budget`), over it and every descendant it starts:
 * positive numbers. The tree gate hands each child on what it may still use (the least of
 * its own, its ancestors' and its tree's), and a remote child carries that in its lineage.
 */
export type ChildBudget = DelegationBudget

/** A child's token usage, summed over its model calls. */
export interface SubagentUsage {
  /** Every input token, cached or not. */
  inputTokens: number
  outputTokens: number
  /** Of `inputTokens`, those served from the provider's prefix cache. */
  cachedInputTokens: number
}

/**
 * One piece of a child's live progress. Observe-only: it never changes the run.
 * - `text`: assistant text streamed since the previous update (merged when coalesced);
 * - `tool-start` / `tool-end`: a tool call began / ended (`args` shortened for display);
 * - `usage`: the run's usage so far (cumulative: the latest replaces earlier ones);
 * - `status`: a plan or status line, where the transport has one (the latest wins).
 */
export type SubagentProgress =
  | { kind: 'text'; text: string }
  | { kind: 'tool-start'; callId: string; name: string; args?: string }
  | { kind: 'tool-end'; callId: string; name: string; ok: boolean; detail?: string }
  | { kind: 'usage'; usage: SubagentUsage }
  | { kind: 'status'; text: string }

export type SubagentProgressKind = SubagentProgress['kind']

/** Where a provider reports progress; coalescing, bounds and ordering are the sink's. */
export interface ProgressSink {
  /** Never throws; a malformed update is dropped and logged. */
  report(update: SubagentProgress): void
}

/** Payload of `subagent/progress`: the updates coalesced since the run's previous one. */
export interface SubagentProgressInfo extends SubagentRunInfo {
  /** 1, 2, 3, … within the run. */
  seq: number
  /** In the order the child produced them (adjacent text merged, only the latest usage and status). */
  updates: SubagentProgress[]
  /** What the bounded buffer left out since the previous event, when the child outran it. */
  dropped?: { updates: number; textChars: number }
}

export interface SubagentResult {
  /** Output selection: the last assistant message with content; else all streamed text; else `[]`. */
  output: TextBlock[]
  /** Validated structured output, when `outputSchema` was requested and the child produced it. */
  structured?: unknown
  /** A readable explanation of a non-`completed` end (stage, cause, exit code, …). */
  diagnostic?: string
  stopReason: StopReason
  /** The run's token usage, when the transport reports it (in-process children always do). */
  usage?: SubagentUsage
  /** What the child changed in its workspace of its own, when it had one (`request.workspace`). */
  workspace?: SubagentWorkspaceReport
}

/** What a child changed in its workspace (see `@dsh/workspaces`' `WorkspaceChanges`). */
export interface SubagentWorkspaceReport {
  mode: 'worktree' | 'copy'
  path: string
  branch?: string
  files: Array<{ path: string; status: 'added' | 'modified' | 'deleted' | 'renamed'; added?: number; removed?: number }>
  diffstat: string
  committed: boolean
  uncommitted: boolean
  /** The directory was gone when it was looked at. */
  missing?: true
  /** Kept for the parent to merge or discard (it has changes); otherwise it was removed. */
  kept: boolean
}

/** One delegation, owned by the caller from publication on. */
export interface SubagentRun {
  /** The child's id: its agent/session id in process, a provider-minted id otherwise. */
  readonly id: string
  /** True when the child is an agent in this process (`ctx.agents.get(id)` finds it). */
  readonly local: boolean
  /** Resolves on every child-level outcome; rejects only for an infrastructure fault. */
  readonly result: Promise<SubagentResult>
  /** Stop remaining work; `result` resolves `aborted` unless it already settled. */
  cancel(reason?: unknown): void
  /** Idempotent; cancels remaining work and resolves once the child is quiescent. */
  dispose(): Promise<void>
  /** Optional runtime feature: steer the running child. Presence is the capability. */
  sendMessage?(message: string): void
  /**
   * Where the child keeps its own record when it is not a session of this process's store,
   * in a few words for a person ("the A2A worker http://10.0.0.2:7700", "Codex's own thread
   * store"): `dsh sessions tree` shows it on a line for a child it cannot find here.
   */
  readonly storedAt?: string
}

export interface SubagentProvider {
  readonly name: string
  readonly capabilities: Readonly<SubagentCapabilities>
  /** Descriptive only: whether the child sees the parent's conversation (fork). */
  readonly inheritsParentContext: boolean
  /** Its children are agents of this process (spawn, fork): their model is resolved here. Absent: they run elsewhere. */
  readonly inProcess?: boolean
  /**
   * A call made again (same parent session, tool call and prompt) takes up the child the
   * first one started, which outlives the parent's process (a queue job): a parent resumed
   * after it died may make its interrupted calls again to collect their results.
   */
  readonly resumableCalls?: boolean
  /** Fulfilment publishes the child; any failure before that rejects with nothing left behind. */
  start(request: SubagentRequest): Promise<SubagentRun>
  /**
   * Optional: take part in a continuable start (presence is the capability; without it
   * `startContinuable` rejects `UNSUPPORTED_CAPABILITY` before anything exists). An
   * in-process provider returns data only (`{ kind: 'in-process', seed? }`); a remote one
   * opens a conversation and returns it. A rejection must leave nothing behind.
   */
  prepareContinuable?(request: PrepareContinuableRequest): Promise<ContinuablePreparation>
  /**
   * Optional, remote providers: reopen the conversation of a record written by an earlier
   * process (ACP: start the agent again and `session/load` the `remoteId`). Rejects with a
   * readable reason when it cannot; the manager then answers `NOT_RESUMABLE`.
   */
  resumeContinuable?(record: RemoteChildRecord, signal: AbortSignal): Promise<RemoteConversation>
}

/** Payload of `subagent/start`. */
export interface SubagentRunInfo {
  runId: string
  provider: string
  /** The child's id (`ctx.agents.get(id)` during the notification, for a local child). */
  id: string
  local: boolean
  parentId: string
  label?: string
  /** The parent's tool call that started this run (`request.callId`), when a tool did: where an editor shows the child's progress. */
  callId?: string
  /** The agent definition the child was started from (`request.helper`), by name. */
  helper?: string
  /** A turn of a continuable child: one start/end pair per turn, the same `id` each time; between turns it is idle. */
  continuable?: true
}

/** Payload of `subagent/end`. */
export interface SubagentRunEndInfo extends SubagentRunInfo {
  stopReason: StopReason
  diagnostic?: string
  /** A deep clone of `result.output`, present when the run settled with output. */
  lastAssistantMessage?: TextBlock[]
  /** The run's token usage, when known (`result.usage`, or the in-process child's own log). */
  usage?: SubagentUsage
}

export const NO_CAPABILITIES: Readonly<SubagentCapabilities> = Object.freeze({
  outputSchema: false,
  depthLimit: false,
  toolFilter: false,
  persona: false,
  workspace: false,
  sandbox: false,
})
