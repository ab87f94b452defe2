/**
 * `dsh acp`'s part in the approval broker (`@dsh/approvals`): what the broker cannot
 * decide by its rules, for an ACP session or for any agent it delegated to in this
 * process, either the server's fixed policy decides (`allow` / `reject`) or the session's
 * client is asked with `session/request_permission`, naming the agent that wants it.
 *
 * When the client is itself a dsh (the `acp` provider of a parent), `_meta.dsh.approval`
 * tells it who asked below this session and whether a rule here asked about it, so the
 * parent's broker asks its own front-end with the whole path and never decides more
 * permissively than this side's rules; the answer's `_meta.dsh.decision` says who really
 * decided (a user at the root's terminal, a rule there), which is what this session records.
 *
 * A session a parent in another process delegated (its lineage names that parent) is a
 * child in a tree: `--permission allow` does not decide for it. What no rule decided is
 * asked up the tree through the client, whose broker decides it by the ancestors' rules
 * or asks at the root (the broker itself bounds this process's own allow rules the same way).
 */
import { methods, type AgentContext, type PermissionOption, type RequestPermissionResponse } from '@agentclientprotocol/sdk'
import { assertNever, errorMessage, isRecord } from '@dsh/base'
import { decodeProvenance, encodeForwarded, type ApprovalFrontEnd, type ApprovalRequestInfo, type FrontEndAnswer, type PermissionPolicy } from '@dsh/approvals'
import type { Context } from 'cordis'

/**
 * `ask`: the client decides; `allow` / `reject`: the server decides alone what no rule
 * decided. The policies and their parser are the approval wire's (`@dsh/approvals`).
 */
export { PERMISSION_POLICIES, type PermissionPolicy } from '@dsh/approvals'

/** The options offered to the client; their ids are ours, their kinds ACP's. */
const OPTIONS: PermissionOption[] = [
  { optionId: 'allow-once', name: 'Allow once', kind: 'allow_once' },
  { optionId: 'allow-always', name: 'Allow this request always in this session', kind: 'allow_always' },
  { optionId: 'reject', name: 'Reject', kind: 'reject_once' },
]

export interface PermissionScope {
  /** The ACP session an agent's requests belong to (its own, or its delegating ancestor's). */
  sessionOf(agentId: string): { id: string } | undefined
  /** Whether that session was delegated by a parent in another process (its `session/new` carried a lineage). */
  delegated(sessionId: string): boolean
  /** The connection's way to call the client. */
  client: AgentContext
}

/** Install `policy` for the sessions of one connection on `ctx.approvals`; returns the disposer. */
export function installPermission(ctx: Context, policy: PermissionPolicy, scope: PermissionScope): () => void {
  switch (policy) {
    case 'allow': {
      // An editor's sessions get the fixed answer; a parent's are asked up the tree.
      const removeDefault = ctx.approvals.setDefault('allow', 'dsh acp --permission allow')
      const removeFrontEnd = ctx.approvals.addFrontEnd(clientFrontEnd(scope, (session) => scope.delegated(session.id)))
      return () => {
        removeFrontEnd()
        removeDefault()
      }
    }
    case 'reject':
      return ctx.approvals.setDefault('reject', 'dsh acp --permission reject')
    case 'ask':
      return ctx.approvals.addFrontEnd(clientFrontEnd(scope))
    default:
      return assertNever(policy, 'permission policy')
  }
}

/** The client as the front-end of the sessions it opened (those `only` picks, when given). */
function clientFrontEnd(scope: PermissionScope, only?: (session: { id: string }) => boolean): ApprovalFrontEnd {
  return {
    name: 'the ACP client',
    serves: (request) => {
      const session = scope.sessionOf(request.agentId)
      return session !== undefined && (only === undefined || only(session))
    },
    ask: (request, signal) => askClient(request, scope, signal),
  }
}

/** What a dsh parent learns of a request beyond ACP's fields (see the file comment): the approval wire's forwarded request. */
export type { ForwardedApproval } from '@dsh/approvals'

/** The hop a decision came through, named once in its `by`. */
const HOP = 'the ACP client'

async function askClient(request: ApprovalRequestInfo, scope: PermissionScope, signal: AbortSignal): Promise<FrontEndAnswer> {
  const session = scope.sessionOf(request.agentId)
  if (!session) return { decision: 'reject', by: 'dsh acp', reason: 'the request belongs to no open ACP session, so there is no client to ask' }
  // The path starts with the session's own agent, which the client knows as the session.
  const forwarded = encodeForwarded(request)
  const who = forwarded.below.length > 0 ? `${forwarded.below.join(' › ')}: ` : ''
  let response: RequestPermissionResponse
  try {
    response = await scope.client.request(
      methods.client.session.requestPermission,
      {
        sessionId: session.id,
        toolCall: { toolCallId: request.callId ?? request.id, title: `${who}${request.tool} ${request.display}`.slice(0, 500), kind: request.kind, status: 'pending', rawInput: request.args },
        options: OPTIONS,
        _meta: { dsh: { approval: forwarded } },
      },
      { cancellationSignal: signal, stopWaitingOnCancel: true },
    )
  } catch (error) {
    const reason = signal.aborted ? 'the request was withdrawn while the client was asked' : `asking the client failed: ${errorMessage(error)}`
    return { decision: 'reject', by: 'dsh acp', reason, ...(signal.aborted && { source: 'cancelled' as const }) }
  }
  const { reason, ...provenance } = decodeProvenance(response._meta, HOP)
  const outcome: unknown = response.outcome
  // Only a selection is an answer: `cancelled`, or anything else a client sends, allows nothing.
  if (!isRecord(outcome) || outcome.outcome !== 'selected') return { decision: 'reject', by: 'the ACP client', reason: reason ?? 'the client cancelled the permission request', ...provenance }
  // Only one of our own options is a valid choice, and only its kind says what it allows.
  const chosen = typeof outcome.optionId === 'string' ? OPTIONS.find((option) => option.optionId === outcome.optionId) : undefined
  switch (chosen?.kind) {
    case 'allow_once':
      return { decision: 'allow-once', by: 'the ACP client', ...provenance }
    case 'allow_always':
      return { decision: 'allow-always', by: 'the ACP client', ...provenance }
    case 'reject_once':
    case 'reject_always':
      return { decision: 'reject', by: 'the ACP client', reason: reason ?? 'the user rejected it', ...provenance }
    default:
      return { decision: 'reject', by: 'dsh acp', reason: `the client chose an unknown option ${(JSON.stringify(outcome.optionId) ?? 'none').slice(0, 80)}` }
  }
}
