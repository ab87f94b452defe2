import type { PermissionDecision, PermissionSource } from '@dsh/base'
import type { Agent } from '@dsh/agent'
import type { PermissionLevel } from '@dsh/session'
import type { ApprovalKind } from './subject.js'
import type { Verdict } from './rules.js'

/**
 * One side effect a descendant wants, as the broker is asked it. An in-process tool call
 * is asked by the broker's own permission gate; a provider asks for a child that runs
 * elsewhere (`remote`), on behalf of the agent that delegated to it.
 */
export interface ApprovalAsk {
  /** The in-process agent the request belongs to: the caller itself, or the parent of the remote child. */
  agent: Agent
  tool: string
  args: unknown
  /** Aborted when the request no longer matters (the call, the run or the parent cancelled): it is rejected at once. */
  signal: AbortSignal
  /** The tool call's id, where there is one. */
  callId?: string
  /** Set when a child that is not an agent of this process asks. */
  remote?: RemoteAsker
  /**
   * `false`: a call of a tool without side effects (`read`), put here only because a verdict
   * source takes it: the sources decide it alone (an ask is asked), no rule or default does.
   */
  sideEffect?: false
}

/** A child of `ApprovalAsk.agent` that lives elsewhere (an ACP agent, Codex, Claude Code, an A2A task). */
export interface RemoteAsker {
  /** The delegation's child id in this process (`acp:…`, the run's id): what the live tree knows it by. */
  child: string
  /** The child as the path names it: `acp "ask an ACP agent"`. */
  name: string
  /** The child's own permission levels (its helper definition's), beyond what its parent is under. */
  levels?: readonly PermissionLevel[]
  /** Names of the agents below the child down to the one that asked, when the child is a dsh that says (an empty list: the child itself). */
  below?: readonly string[]
  /**
   * The verdict the child's own policy gave, when it applied one (a dsh child forwards
   * only what its rules did not decide: `ask`, or no opinion): the broker never decides
   * more permissively than this.
   */
  verdict?: Verdict
  /** The child keeps no session of this store: the broker records the decision in the delegating agent's session. */
  record: boolean
}

/** A request as front-ends and listeners see it. Never holds more than the call shows. */
export interface ApprovalRequestInfo {
  /** `approval-N`, unique in this process. */
  readonly id: string
  /** Who asks, from the root down: `dsh`, `spawn "survey"`, `acp "review"`, `spawn "check"`. */
  readonly path: readonly string[]
  /** Ids along the path that this process knows (agent ids, then a remote child's id): the live tree marks each as waiting. */
  readonly chain: readonly string[]
  /** The in-process agent the request belongs to. */
  readonly agentId: string
  /** The remote child's id, for a remote request. */
  readonly child?: string
  readonly tool: string
  /** The call's subject (a command, a path, compact JSON), at most a few thousand characters. */
  readonly subject: string
  /** The same, shortened for one line. */
  readonly display: string
  readonly kind: ApprovalKind
  /** The call's arguments, for a front-end that shows structure (an ACP client's `rawInput`). */
  readonly args: unknown
  readonly callId?: string
  /** Why it is asked: a rule said `ask` (`rule` names it where one did), or no rule had an opinion (`none`). */
  readonly policy: 'ask' | 'none'
  readonly rule?: string
  /** `false`: a call of a tool without side effects, which only verdict sources decide (asked up the tree for an ancestor's). */
  readonly sideEffect?: false
  readonly startedAt: number
  /** When it is rejected if nobody has answered. */
  readonly expiresAt: number
}

/** What a front-end answers; the broker adds `source`, `at` and `by` where they are missing. */
export type FrontEndAnswer = PermissionDecision

/**
 * Whoever can answer: the user at `dsh run`'s terminal, an ACP client (`dsh acp`), an A2A
 * caller (`dsh a2a serve`), the `dsh ui` page. Registered with `ctx.approvals.addFrontEnd`.
 */
export interface ApprovalFrontEnd {
  /** Who answers, in a few words, for the record: `the user at the terminal`. */
  readonly name: string
  /**
   * One request on screen at a time (a terminal prompt): the broker queues the others and
   * takes them in turn from each asking agent, so one agent's flood never holds up the rest.
   */
  readonly oneAtATime?: boolean
  /** Whether this front-end answers for `request` (an ACP connection answers for its own sessions only). Default: every request. */
  serves?(request: ApprovalRequestInfo): boolean
  /**
   * Ask; resolve with the answer. `signal` aborts when the request is withdrawn (the call
   * cancelled, the time up): stop asking then (the answer is ignored). A rejection of the
   * promise rejects the request, saying why.
   */
  ask(request: ApprovalRequestInfo, signal: AbortSignal): Promise<FrontEndAnswer>
}

/**
 * Records and replays decisions (`@dsh/llm-replay` with `--record` / `replay:`): `replay`
 * is asked before anyone else and answers a request the recording decided; `record` hears
 * every decision of a session that is recorded.
 */
export interface ApprovalRecorder {
  /** A recorded decision for this request, or `undefined` to decide it live. May throw: the request is rejected saying why. */
  replay?(request: ApprovalRequestInfo, sessionId: string): PermissionDecision | undefined
  record?(request: ApprovalRequestInfo, sessionId: string, decision: PermissionDecision): void
}

export interface ApprovalSettledInfo {
  request: ApprovalRequestInfo
  decision: PermissionDecision
}

export type { PermissionDecision, PermissionSource }
