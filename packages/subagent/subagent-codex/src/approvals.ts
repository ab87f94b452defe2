/**
 * Answers to the requests the app-server sends us. Nobody is at a keyboard behind a
 * delegated run, so every approval is decided by the configured `permissionMode`, every
 * decline is noted for the diagnostic, and a request we cannot answer gets a JSON-RPC
 * error at once: the server waits for an answer forever, so silence would hang the turn.
 */
import { assertNever, isRecord } from '@dsh/base'
import { METHOD_NOT_FOUND, REQUEST_REFUSED } from './connection.js'
import type {
  ApplyPatchApprovalResponse,
  CommandExecutionRequestApprovalResponse,
  ExecCommandApprovalResponse,
  FileChangeRequestApprovalResponse,
  McpServerElicitationRequestResponse,
  PermissionsRequestApprovalResponse,
  ServerRequest,
} from './protocol/index.js'

export type PermissionMode = 'decline' | 'accept'

export type ServerRequestAnswer =
  | { kind: 'result'; result: unknown; note?: string }
  | { kind: 'error'; code: number; message: string; note?: string }

type ServerRequestMethod = ServerRequest['method']

/** Decide the answer to one server request. `params` come off the wire: only read defensively. */
export function answerServerRequest(method: string, params: unknown, mode: PermissionMode): ServerRequestAnswer {
  if (!isKnownMethod(method)) {
    return { kind: 'error', code: METHOD_NOT_FOUND, message: `the dsh codex provider does not handle ${method}`, note: `refused unknown request ${method}` }
  }
  const accept = mode === 'accept'
  const declined = (what: string) => (accept ? undefined : `declined ${what}`)
  switch (method) {
    case 'item/commandExecution/requestApproval': {
      const result: CommandExecutionRequestApprovalResponse = { decision: accept ? 'accept' : 'decline' }
      return { kind: 'result', result, note: declined(`command ${describe(field(params, 'command'))}`) }
    }
    case 'item/fileChange/requestApproval': {
      const result: FileChangeRequestApprovalResponse = { decision: accept ? 'accept' : 'decline' }
      return { kind: 'result', result, note: declined(`file change${reason(params)}`) }
    }
    case 'item/permissions/requestApproval': {
      // Declining grants nothing; accepting grants what was asked, for this turn only.
      const asked = field(params, 'permissions')
      const result: PermissionsRequestApprovalResponse = {
        permissions: accept && isRecord(asked) ? withoutNulls(asked) : {},
        scope: 'turn',
      }
      return { kind: 'result', result, note: declined(`extra permissions${reason(params)}`) }
    }
    case 'execCommandApproval': {
      const result: ExecCommandApprovalResponse = { decision: accept ? 'approved' : { denied: { rejection: DECLINED_BY_POLICY } } }
      const command = field(params, 'command')
      return { kind: 'result', result, note: declined(`command ${describe(Array.isArray(command) ? command.join(' ') : command)}`) }
    }
    case 'applyPatchApproval': {
      const result: ApplyPatchApprovalResponse = { decision: accept ? 'approved' : { denied: { rejection: DECLINED_BY_POLICY } } }
      return { kind: 'result', result, note: declined(`patch${reason(params)}`) }
    }
    case 'mcpServer/elicitation/request': {
      // An elicitation wants a person to fill in a form; even `accept` has nothing to fill it with.
      const result: McpServerElicitationRequestResponse = { action: 'decline', content: null, _meta: null }
      return { kind: 'result', result, note: `declined an MCP elicitation from ${describe(field(params, 'serverName'))}` }
    }
    case 'item/tool/requestUserInput':
      return { kind: 'error', code: REQUEST_REFUSED, message: 'no user to ask: dsh runs codex unattended', note: 'refused a request for user input' }
    case 'item/tool/call':
      return { kind: 'error', code: REQUEST_REFUSED, message: 'the dsh codex provider registers no dynamic tools' }
    case 'account/chatgptAuthTokens/refresh':
      return { kind: 'error', code: REQUEST_REFUSED, message: 'the dsh codex provider does not manage ChatGPT tokens; log in with `codex login` in CODEX_HOME' }
    case 'attestation/generate':
      return { kind: 'error', code: REQUEST_REFUSED, message: 'the dsh codex provider did not opt into attestation' }
    default:
      return assertNever(method, 'server request method')
  }
}

const DECLINED_BY_POLICY = 'declined by the dsh codex provider (permissionMode: decline)'

/** Every method of the generated `ServerRequest` union: the `satisfies` keeps this list complete. */
const KNOWN_METHODS = {
  'item/commandExecution/requestApproval': true,
  'item/fileChange/requestApproval': true,
  'item/tool/requestUserInput': true,
  'mcpServer/elicitation/request': true,
  'item/permissions/requestApproval': true,
  'item/tool/call': true,
  'account/chatgptAuthTokens/refresh': true,
  'attestation/generate': true,
  applyPatchApproval: true,
  execCommandApproval: true,
} satisfies Record<ServerRequestMethod, true>

function isKnownMethod(method: string): method is ServerRequestMethod {
  return Object.hasOwn(KNOWN_METHODS, method)
}

function field(params: unknown, name: string): unknown {
  return isRecord(params) ? params[name] : undefined
}

function reason(params: unknown): string {
  const text = field(params, 'reason')
  return typeof text === 'string' && text ? ` (${text})` : ''
}

function describe(value: unknown): string {
  if (typeof value !== 'string' || !value) return '(unnamed)'
  return JSON.stringify(value.length > 120 ? `${value.slice(0, 120)}…` : value)
}

/** The requested profile has `null` for "not asked"; the granted one leaves those out. */
function withoutNulls(value: Record<string, unknown>): PermissionsRequestApprovalResponse['permissions'] {
  return Object.fromEntries(Object.entries(value).filter(([, entry]) => entry !== null)) as PermissionsRequestApprovalResponse['permissions']
}
