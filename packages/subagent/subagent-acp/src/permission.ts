/**
 * How the provider answers an agent's `session/request_permission`: by default (`ask`)
 * the request goes up to the parent's approval broker (`@dsh/approvals`), which decides it
 * by its rules or asks whoever is at the root of the tree, naming the child; `allow` /
 * `reject` decide every request here, unasked (and are what happens without a broker).
 *
 * A `dsh acp` child says in `_meta.dsh.approval` who below it asked and whether its own
 * rules asked about it (see `@dsh/acp-server`'s `ForwardedApproval`); the answer carries
 * `_meta.dsh.decision`, who really decided, which the child records.
 */
import { assertNever, isRecord, type PermissionDecision } from '@dsh/base'
import type { PermissionOption, RequestPermissionRequest, RequestPermissionResponse } from '@agentclientprotocol/sdk'
import { decodeForwarded, provenanceMeta, TOOL_NAME, type ApprovalAsk, type ApprovalService, type ForwardedApproval } from '@dsh/approvals'
import type { Agent } from '@dsh/agent'
import type { PermissionLevel } from '@dsh/session'

export type { PermissionPolicy } from '@dsh/approvals'

/**
 * The JSON-RPC code of a write or command (of a shared workspace) the parent's approval
 * broker refused. Here rather than beside the workspace, which loads the ACP SDK: the
 * package's entry exports it, and loading the entry loads no SDK (see sdk.ts).
 */
export const REFUSED_BY_APPROVAL = -32003

/**
 * `reject`: the first reject option the agent offers; `allow`: the first allow option.
 * When the agent offers no option of that kind, or the turn is being cancelled, the
 * answer is `cancelled` (ACP's "no decision"), never an option of the opposite kind.
 */
export function answerPermission(policy: 'reject' | 'allow', options: readonly PermissionOption[], cancelling: boolean): RequestPermissionResponse {
  if (cancelling) return { outcome: { outcome: 'cancelled' } }
  const wanted = optionKinds(policy)
  const option = options.find((candidate) => wanted.includes(candidate.kind))
  return option ? { outcome: { outcome: 'selected', optionId: option.optionId } } : { outcome: { outcome: 'cancelled' } }
}

function optionKinds(policy: 'reject' | 'allow'): readonly PermissionOption['kind'][] {
  switch (policy) {
    case 'reject':
      return ['reject_once', 'reject_always']
    case 'allow':
      return ['allow_once', 'allow_always']
    default:
      return assertNever(policy, 'permission policy')
  }
}

/** Whose requests an agent's permission asks are: the delegation, as the parent's broker names it. */
export interface ApprovalScope {
  /** The delegating agent (the parent), in this process. */
  parent: Agent
  /** The child as the path names it: `acp "review"`, or its helper's name. */
  name: string
  /** The child's permission levels beyond its parent's (its process's rules, its helper's). */
  levels?: readonly PermissionLevel[]
  /**
   * The child's id as the parent knows it, when that is not the run's `<provider>:<session>`:
   * a continuable child's record id (what `list_agents` and the live tree name it by).
   */
  child?: string
}

/**
 * What a `dsh acp` child says of a request beyond ACP's fields (`_meta.dsh.approval`, the
 * approval wire's forwarded request); anything malformed makes it a plain ACP request.
 */
export function readForwarded(meta: unknown): ForwardedApproval | undefined {
  const approval = isRecord(meta) && isRecord(meta.dsh) ? meta.dsh.approval : undefined
  if (approval === undefined) return undefined
  const read = decodeForwarded(approval)
  return read.ok ? read.value : undefined
}

/**
 * The broker's request for one `session/request_permission` of the child `childId`. A
 * plain ACP agent's tool calls are named by their kind, as rules name them: a command it
 * runs is `bash`, a file it edits, deletes or moves is `edit`, anything else its title.
 */
export function approvalAsk(params: RequestPermissionRequest, childId: string, scope: ApprovalScope, signal: AbortSignal): ApprovalAsk {
  const forwarded = readForwarded(params._meta)
  const { toolCall } = params
  const rawInput = toolCall.rawInput
  if (forwarded) {
    return {
      agent: scope.parent,
      tool: forwarded.tool,
      // The subject is what the child's rules matched; a command stays a command here.
      args: isRecord(rawInput) ? rawInput : { subject: forwarded.subject },
      signal,
      callId: toolCall.toolCallId,
      remote: { child: childId, name: scope.name, below: forwarded.below, record: false, ...(forwarded.policy === 'ask' && { verdict: 'ask' as const }), ...(scope.levels && { levels: scope.levels }) },
      // A read-only call asked up for this side's PreToolUse hooks: only they decide it.
      ...(forwarded.sideEffect === false && { sideEffect: false as const }),
    }
  }
  const kind = toolCall.kind
  const title = typeof toolCall.title === 'string' ? toolCall.title : ''
  const tool = kind === 'execute' ? 'bash' : kind === 'edit' || kind === 'delete' || kind === 'move' ? 'edit' : TOOL_NAME.test(title) ? title : (kind ?? 'other')
  return {
    agent: scope.parent,
    tool,
    args: isRecord(rawInput) ? rawInput : { title },
    signal,
    callId: toolCall.toolCallId,
    remote: { child: childId, name: scope.name, record: true, ...(scope.levels && { levels: scope.levels }) },
  }
}

/**
 * The broker's decision as the agent's option: for a dsh child, "always" is its own allow
 * always (it remembers the same request only); a plain ACP agent gets allow once even then,
 * since its own "always" may cover more than this request (the broker remembers it here).
 */
export function responseOf(decision: PermissionDecision, options: readonly PermissionOption[], dshChild: boolean): RequestPermissionResponse {
  const kinds: readonly PermissionOption['kind'][] =
    decision.decision === 'reject' ? ['reject_once', 'reject_always'] : decision.decision === 'allow-always' && dshChild ? ['allow_always', 'allow_once'] : ['allow_once', 'allow_always']
  const option = kinds.map((kind) => options.find((candidate) => candidate.kind === kind)).find((found) => found !== undefined)
  const _meta = provenanceMeta(decision)
  return option ? { outcome: { outcome: 'selected', optionId: option.optionId }, _meta } : { outcome: { outcome: 'cancelled' }, _meta }
}

export type { ApprovalService }
