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
import { assertNever, errorMessage, isRecord, PERMISSION_SOURCES, type PermissionSource } from '@dsh/base'
import type { ApprovalFrontEnd, ApprovalRequestInfo, FrontEndAnswer } from '@dsh/approvals'
import type { Context } from 'cordis'

/** `ask`: the client decides; `allow` / `reject`: the server decides alone what no rule decided. */
export type PermissionPolicy = 'ask' | 'allow' | 'reject'
export const PERMISSION_POLICIES: readonly PermissionPolicy[] = ['ask', 'allow', 'reject']

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

const THROUGH = ' (through the ACP client)'

/** What a dsh parent learns of a request beyond ACP's fields (see the file comment). */
export interface ForwardedApproval {
  /** The agents below the ACP session down to the one that asked (empty: the session's own agent). */
  below: string[]
  tool: string
  /** The call's subject (a command, a path), as rules match it. */
  subject: string
  /** `ask`: a rule here asks about it; absent: no rule here had an opinion. */
  policy?: 'ask'
}

async function askClient(request: ApprovalRequestInfo, scope: PermissionScope, signal: AbortSignal): Promise<FrontEndAnswer> {
  const session = scope.sessionOf(request.agentId)
  if (!session) return { decision: 'reject', by: 'dsh acp', reason: 'the request belongs to no open ACP session, so there is no client to ask' }
  // The path starts with the session's own agent, which the client knows as the session.
  const below = request.path.slice(1)
  const forwarded: ForwardedApproval = { below, tool: request.tool, subject: request.subject, ...(request.policy === 'ask' && { policy: 'ask' as const }) }
  const who = below.length > 0 ? `${below.join(' › ')}: ` : ''
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
  const { reason, ...provenance } = decisionProvenance(response._meta)
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

/**
 * Who really decided, when the client is a dsh that says so in `_meta.dsh.decision`
 * (`by`, `source`, `rule`, `reason`): checked field by field, anything malformed left out.
 */
function decisionProvenance(meta: unknown): { by?: string; source?: PermissionSource; rule?: string; reason?: string } {
  const decision = isRecord(meta) && isRecord(meta.dsh) ? meta.dsh.decision : undefined
  if (!isRecord(decision)) return {}
  const read: { by?: string; source?: PermissionSource; rule?: string; reason?: string } = {}
  // Said once however many dsh processes the answer came down through.
  if (typeof decision.by === 'string' && decision.by !== '') read.by = decision.by.endsWith(THROUGH) ? decision.by.slice(0, 200) : `${decision.by.slice(0, 160)}${THROUGH}`
  if ((PERMISSION_SOURCES as readonly unknown[]).includes(decision.source)) read.source = decision.source as PermissionSource
  if (typeof decision.rule === 'string') read.rule = decision.rule.slice(0, 600)
  if (typeof decision.reason === 'string' && decision.reason !== '') read.reason = decision.reason.slice(0, 500)
  return read
}
