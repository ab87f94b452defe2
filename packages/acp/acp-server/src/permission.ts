/**
 * `dsh acp`'s permission gate (see `ToolRegistry.addPermissionGate` in `@dsh/tools`):
 * before a side-effecting tool runs for an ACP session, or for any child agent it
 * delegated to in this process, the server either applies its fixed policy or asks the
 * session's client with `session/request_permission`.
 */
import { methods, type AgentContext, type PermissionOption, type RequestPermissionResponse } from '@agentclientprotocol/sdk'
import { assertNever, errorMessage } from '@dsh/base'
import type { ToolPermissionDecision, ToolPermissionRequest } from '@dsh/tools'

/** `ask`: the client decides each call; `allow` / `reject`: the server decides every call alone. */
export type PermissionPolicy = 'ask' | 'allow' | 'reject'
export const PERMISSION_POLICIES: readonly PermissionPolicy[] = ['ask', 'allow', 'reject']

/** The options offered to the client; their ids are ours, their kinds ACP's. */
const OPTIONS: PermissionOption[] = [
  { optionId: 'allow-once', name: 'Allow once', kind: 'allow_once' },
  { optionId: 'allow-always', name: 'Allow always in this session', kind: 'allow_always' },
  { optionId: 'reject', name: 'Reject', kind: 'reject_once' },
]

export interface PermissionScope {
  /** The ACP session an agent's calls belong to (its own, or its delegating ancestor's). */
  sessionOf(agentId: string): { id: string; alwaysAllowed: Set<string> } | undefined
  /** The connection's way to call the client. */
  client: AgentContext
}

/** A gate for `policy` over the sessions of one connection. */
export function permissionGate(policy: PermissionPolicy, scope: PermissionScope) {
  return async (request: ToolPermissionRequest): Promise<ToolPermissionDecision> => {
    switch (policy) {
      case 'allow':
        return { decision: 'allow-once', by: 'dsh acp --permission allow' }
      case 'reject':
        return { decision: 'reject', by: 'dsh acp --permission reject', reason: 'this server runs no side-effecting tool; do without it' }
      case 'ask':
        return ask(request, scope)
      default:
        return assertNever(policy, 'permission policy')
    }
  }
}

async function ask(request: ToolPermissionRequest, scope: PermissionScope): Promise<ToolPermissionDecision> {
  const session = scope.sessionOf(request.agent.id)
  if (!session) return { decision: 'reject', by: 'dsh acp', reason: 'the call belongs to no open ACP session, so there is no client to ask' }
  if (session.alwaysAllowed.has(request.tool.name)) return { decision: 'allow-always', by: 'the ACP client (earlier in this session)' }
  let response: RequestPermissionResponse
  try {
    response = await scope.client.request(
      methods.client.session.requestPermission,
      {
        sessionId: session.id,
        toolCall: { toolCallId: request.call.id, title: request.tool.name, kind: request.tool.name === 'bash' ? 'execute' : 'other', status: 'pending', rawInput: request.call.args },
        options: OPTIONS,
      },
      { cancellationSignal: request.signal, stopWaitingOnCancel: true },
    )
  } catch (error) {
    const reason = request.signal.aborted ? 'the call was cancelled while the client was asked' : `asking the client failed: ${errorMessage(error)}`
    return { decision: 'reject', by: 'dsh acp', reason }
  }
  const { outcome } = response
  if (outcome.outcome === 'cancelled') return { decision: 'reject', by: 'the ACP client', reason: 'the client cancelled the permission request' }
  switch (outcome.optionId) {
    case 'allow-once':
      return { decision: 'allow-once', by: 'the ACP client' }
    case 'allow-always':
      session.alwaysAllowed.add(request.tool.name)
      return { decision: 'allow-always', by: 'the ACP client' }
    case 'reject':
      return { decision: 'reject', by: 'the ACP client', reason: 'the user rejected this call' }
    default:
      // Only our own option ids are valid answers: anything else is not a permission.
      return { decision: 'reject', by: 'dsh acp', reason: `the client chose an unknown option ${JSON.stringify(outcome.optionId).slice(0, 80)}` }
  }
}
