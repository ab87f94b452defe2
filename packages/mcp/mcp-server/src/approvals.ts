/**
 * `dsh mcp serve`'s part in the approval broker (`@dsh/approvals`): what the broker leaves
 * to ask, for a call's agent or any in-process agent below it, is asked of the client's
 * user through MCP elicitation (`elicitation/create`, a form with one choice: allow once,
 * allow always in this call's tree, reject), where the client declared that capability.
 * A client that did not cannot be asked: the request is rejected, saying what to configure.
 * `--permission allow | reject` decides alone instead. Nothing is allowed by default.
 */
import { assertNever, isRecord, printable } from '@dsh/base'
import { ANSWER_DECISIONS, isAnswerDecision, type ApprovalFrontEnd, type ApprovalRequestInfo, type ApprovalService, type FrontEndAnswer, type PermissionPolicy } from '@dsh/approvals'
import type { ElicitRequestFormParams } from '@modelcontextprotocol/sdk/types.js'
import type { RunningCall } from './calls.js'

/** Who answers an elicitation, as decisions record it. */
export const MCP_CLIENT = 'the MCP client (elicitation)'

/** Why a request is rejected when the client cannot be asked. */
export const CLIENT_CANNOT_ASK =
  'the MCP client did not declare the elicitation capability (for forms), so nobody can be asked: allow the command by a rule (approvals allow in the config), or start dsh mcp serve with --permission allow'

/** The running calls, by the id of their agent (a root here). */
export interface CallsByAgent {
  get(agentId: string): RunningCall | undefined
  has(agentId: string): boolean
}

/** Install `policy` on the broker; returns the disposer. */
export function installPermission(approvals: ApprovalService, policy: PermissionPolicy, calls: CallsByAgent): () => void {
  switch (policy) {
    case 'allow':
      return approvals.setDefault('allow', 'dsh mcp serve --permission allow')
    case 'reject':
      return approvals.setDefault('reject', 'dsh mcp serve --permission reject')
    case 'ask':
      return approvals.addFrontEnd(clientFrontEnd(calls))
    default:
      return assertNever(policy, 'permission policy')
  }
}

function clientFrontEnd(calls: CallsByAgent): ApprovalFrontEnd {
  return {
    name: MCP_CLIENT,
    // The chain starts with the agent of this process the request comes from: a call's agent is a root here.
    serves: (request) => request.chain[0] !== undefined && calls.has(request.chain[0]),
    ask: async (request, signal) => {
      const elicit = calls.get(request.chain[0] ?? '')?.wire.elicit
      if (elicit === undefined) return { decision: 'reject', by: 'dsh mcp serve', source: 'default', reason: CLIENT_CANNOT_ASK }
      const result = await elicit(elicitation(request), signal, Math.max(1, request.expiresAt - Date.now()))
      return answerOf(result.action, result.content)
    },
  }
}

/**
 * The form that asks about `request`: who wants to run what, and one choice. The subject is
 * the request's `subject`, whole (or, past what a front-end is shown, its start and the
 * digest of the whole), never the one-line `display`, which is cut at 400 characters: a
 * command padded past it would show only its harmless start. Everything from the call is
 * `printable`, so no carriage return, escape sequence or bidi override can redraw it.
 */
export function elicitation(request: ApprovalRequestInfo): ElicitRequestFormParams {
  const why = request.policy === 'ask' ? ` (${request.rule !== undefined ? `the rule ${request.rule}` : 'a rule'} asks about it)` : ''
  return {
    mode: 'form',
    message: printable(`${request.path.join(' › ')} wants to run ${request.tool}${why}:\n${request.subject}\nAllow it?`),
    requestedSchema: {
      type: 'object',
      properties: {
        decision: {
          type: 'string',
          title: 'Decision',
          description: 'allow-once runs this call; allow-always also allows the same request again in this call; reject refuses it',
          enum: [...ANSWER_DECISIONS],
        },
      },
      required: ['decision'],
    },
  }
}

/** The broker's answer for an elicitation's result: only an accepted form with a decision allows anything. */
export function answerOf(action: string, content: unknown): FrontEndAnswer {
  if (action === 'decline') return { decision: 'reject', by: MCP_CLIENT, reason: "the MCP client's user declined" }
  if (action !== 'accept') return { decision: 'reject', by: MCP_CLIENT, reason: "the MCP client's user dismissed the request" }
  const decision = isRecord(content) ? content.decision : undefined
  if (!isAnswerDecision(decision)) return { decision: 'reject', by: MCP_CLIENT, reason: `the MCP client's answer is not one of ${ANSWER_DECISIONS.join(', ')}` }
  if (decision === 'reject') return { decision: 'reject', by: MCP_CLIENT, reason: "the MCP client's user rejected it" }
  return { decision, by: MCP_CLIENT }
}
