import type { AssistantMessage, FinishReason, ToolCallBlock, ToolResultBlock, Usage, UserMessage } from '@dsh/llm'

/** Why a turn ended (the vocabulary and its mappings live in `@dsh/base`). */
export type { StopReason } from '@dsh/base'
import { PERMISSION_DECISIONS, type PermissionDecision, type PermissionLevel, type StopReason } from '@dsh/base'

/**
 * Durable session events, in the order of the turn flow. Each is appended to the
 * session's own log and persisted; the model's view of the conversation is derived from
 * these alone.
 */
export type SessionEventBody =
  | { type: 'turn/start'; turn: number }
  | { type: 'step/start'; step: number }
  | { type: 'user/message'; message: UserMessage }
  | { type: 'assistant/message'; message: AssistantMessage; finish?: FinishReason; usage?: Usage }
  | { type: 'tool/call'; call: ToolCallBlock }
  /** `record`: the tool's own facts about the call, not model-visible (see `ToolOutput.record` in `@dsh/tools`). */
  | { type: 'tool/result'; result: ToolResultBlock; permission?: ToolPermissionRecord; record?: Readonly<Record<string, unknown>> }
  | { type: 'step/end'; step: number }
  | { type: 'turn/end'; turn: number; reason: StopReason; error?: string }
  /**
   * Input accepted for this session's agent that it has not taken yet: a notice or report
   * for it (`as: 'notice'`), a message for it as a continuable child (`as: 'message'`: a turn
   * of its own). Durable, so a restart delivers it; not model-visible (the `user/message`
   * it becomes is).
   */
  | { type: 'input/queued'; id: string; as: InputKind; message: UserMessage }
  /** Queued input the agent took (it follows as `user/message`), or, with `dropped`, that will never reach it. */
  | { type: 'input/taken'; ids: string[]; dropped?: string }
  /**
   * An approval decided for a child that keeps no session of this store (a Codex or
   * Claude Code child, an ACP agent that is not dsh): what it asked and how it was
   * decided, in the session of the agent that delegated to it. (An in-process call's
   * decision is its `tool/result`'s `permission`; a `dsh acp` child records its own.)
   * Not model-visible.
   */
  | { type: 'approval'; request: ApprovalRecordRequest; permission: ToolPermissionRecord }
  /**
   * One run of a hook command (`@dsh/hooks`), in the session of the agent it ran for (for a
   * request a remote child forwarded, the agent that delegated to it): the hook event, the
   * command, its exit code (absent when it did not exit by itself), how long it ran, what it
   * decided, and, for a tool event, the call. Not model-visible.
   */
  | { type: 'hook/run'; event: string; command: string; exitCode?: number; durationMs: number; decision?: HookRunDecision; callId?: string; note?: string }

/** What a hook decided: `block` (refused), `ask` (put to a person), `allow` (no objection). */
export type HookRunDecision = 'block' | 'ask' | 'allow'

/** What queued input is: a notice or report for the agent, or a message to it as a continuable child (a turn of its own). */
export type InputKind = 'notice' | 'message'

export const INPUT_KINDS: readonly InputKind[] = ['notice', 'message']

export type SessionEventType = SessionEventBody['type']

/**
 * How a side-effecting tool call was permitted or refused before it ran (see `@dsh/tools`
 * permission gates and `@dsh/approvals`), kept with its result: the one decision
 * vocabulary of `@dsh/base`.
 */
export type ToolPermissionRecord = PermissionDecision

/** The decisions a record may hold (`PERMISSION_DECISIONS` of `@dsh/base`). */
export const TOOL_PERMISSION_DECISIONS = PERMISSION_DECISIONS

export {
  PERMISSION_SOURCES,
  PERMISSION_BOUNDS,
  PERMISSION_LISTS,
  PERMISSION_RULE,
  cleanPermissionLevel,
  isEmptyPermissionLevel,
  joinPermissionLevels,
  permissionLevelProblem,
  permissionLevelsProblem,
  permissionRuleProblem,
  type PermissionLevel,
  type PermissionProvenance,
  type PermissionSource,
} from '@dsh/base'

/** What a child without a session of its own asked to do (the `approval` event). */
export interface ApprovalRecordRequest {
  /** Who asked, from the root down: `dsh`, `codex "fix the test"`. */
  path: string[]
  tool: string
  /** The call's arguments as shown to whoever decided (a command, a path), shortened. */
  subject: string
  /** The delegation's child id in this process (`codex:thread-1`). */
  child?: string
}


export type SessionEvent = SessionEventBody & {
  /** Position in the log, contiguous from 0 (a fork child's own events continue after its seed). */
  seq: number
  /** Milliseconds since the epoch. */
  ts: number
}

/** A live, never-persisted streaming fragment of the assistant message being produced. */
export interface AssistantChunk {
  type: 'assistant/chunk'
  kind: 'text' | 'reasoning'
  text: string
}

export type SessionUpdate = SessionEvent | AssistantChunk

export const SESSION_EVENT_TYPES: readonly SessionEventType[] = [
  'turn/start', 'step/start', 'user/message', 'assistant/message', 'tool/call', 'tool/result', 'step/end', 'turn/end', 'input/queued', 'input/taken', 'approval', 'hook/run',
]

/** The frozen first record of every session. */
export interface SessionHeader {
  id: string
  createdAt: string
  cwd: string
  /** The session that delegated to this one. */
  parentSession?: string
  /** Who created the session: `cli`, `subagent`, `acp`, … */
  origin?: string
  /** 0 for a root agent; a child's is its parent's plus one. */
  delegationDepth?: number
  /**
   * The absolute delegation-depth bound this session inherited (from the delegation that
   * made it, or from a `dsh acp` lineage): no descendant of it may be deeper.
   */
  maxDepth?: number
  /** Number of events seeded from `parentSession` (fork); own events start at this seq. */
  seedLength?: number
  /** The subagent provider that created it, when it is a child. */
  provider?: string
  /** A short human label (the delegation's description). */
  label?: string
  /**
   * The id of the parent's tool call that started this child, when a tool did. With the
   * parent's own lineage it names the child stably across runs (a replay binds the child
   * to its recording by it).
   */
  toolCallId?: string
  /**
   * The durable description of a continuable child (owned and validated by
   * `@dsh/subagent`; opaque JSON here): enough to rebuild the child from its file alone.
   */
  descriptor?: Readonly<Record<string, unknown>>
  /**
   * The agent definition the child was started from (`@dsh/agent-definitions`): its name
   * and the hash of its file, so a resume can tell that the file has changed since.
   */
  helper?: HelperRef
  /**
   * The W3C trace context of the delegating call, when the parent was traced: a tracer
   * puts this session's spans under it (see `@dsh/tracing`). Never content.
   */
  trace?: TraceContext
  /**
   * Which try of its delegation this session is, from 1, where the delegation may be tried
   * again elsewhere (a queue job another worker took over after the first one died).
   */
  attempt?: number
  /**
   * The permission rules this session's agent is under besides its own process's: its
   * ancestors' and its helper definition's, outermost first (see `PermissionLevel`).
   */
  permissions?: readonly PermissionLevel[]
  /**
   * What this session's agent and everything it delegates to may still use, as its
   * delegation handed it on (the least of its own budget, its ancestors' and its tree's
   * left): a root with one is bounded by it in its own process (see `@dsh/subagent`).
   */
  budget?: DelegationBudget
  /**
   * With nobody to ask, what its ancestors let happen to a side effect no rule decides,
   * as its delegation handed it on: the most restrictive default of every process up the
   * chain (`reject` where any rejects). A process serving it for a parent elsewhere never
   * allows more by its own default (see `@dsh/approvals`). Absent: not said (a root, or a
   * parent older than the field).
   */
  approvalDefault?: 'allow' | 'reject'
  /**
   * The workspace of its own a delegation gave this session's agent (`@dsh/workspaces`):
   * its directory is also `cwd`. Absent: it works in its parent's directory.
   */
  workspace?: WorkspaceRef
  /**
   * Its commands run confined (bubblewrap, see `@dsh/bash`): `cwd` writable, the rest of the
   * file system read-only, no other process visible, and no network unless `network`.
   */
  sandbox?: SandboxSpec
}

/** Where a child works when it has a workspace of its own. */
export interface WorkspaceRef {
  /** `worktree`: a git worktree of the parent's repository on a branch of its own; `copy`: a copy of a directory that is not one. */
  mode: 'worktree' | 'copy'
  /** The workspace's directory, absolute. */
  path: string
  /** The directory it was made from (the parent's), absolute. */
  source: string
  /** `worktree`: its branch. */
  branch?: string
  /** `worktree`: the commit it started from. */
  base?: string
  /**
   * `worktree`: the repository's git directory, which its commits write to (a confined
   * child's commands need it writable beside the worktree).
   */
  gitDir?: string
}

/** How a session's commands are confined (`SessionHeader.sandbox`). */
export interface SandboxSpec {
  /** Whether its commands may reach the network. */
  network: boolean
}

/** A budget handed to a delegation: positive numbers, every one optional. */
export interface DelegationBudget {
  outputTokens?: number
  inputTokens?: number
  /** Money in the unit of the prices table. */
  cost?: number
  /** Children it may start below it. */
  children?: number
  /** Milliseconds it may run, from its session's creation. */
  wallTimeMs?: number
}

export const DELEGATION_BUDGET_LIMITS = ['outputTokens', 'inputTokens', 'cost', 'children', 'wallTimeMs'] as const satisfies readonly (keyof DelegationBudget)[]

/** A budget as read from a file or a peer, or `undefined` when it is not one (never partly read: a part left out would grant more). */
export function readDelegationBudget(value: unknown): DelegationBudget | undefined {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return undefined
  const record = value as Record<string, unknown>
  const budget: DelegationBudget = {}
  for (const key of Object.keys(record)) {
    if (!(DELEGATION_BUDGET_LIMITS as readonly string[]).includes(key)) return undefined
    const limit = record[key]
    if (typeof limit !== 'number' || !Number.isFinite(limit) || limit < 0 || limit > 1e15) return undefined
    if (key !== 'cost' && !Number.isSafeInteger(limit)) return undefined
    budget[key as keyof DelegationBudget] = limit
  }
  return budget
}

/** A definition as a session records it: its name and a hash of its file. */
export interface HelperRef {
  name: string
  hash: string
}

/** A W3C trace context (`traceparent`, and `tracestate` when there is one), as it crosses a boundary. */
export interface TraceContext {
  traceparent: string
  tracestate?: string
}
