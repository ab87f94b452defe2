/**
 * Answers to the requests the app-server sends us: the one place a Codex approval meets
 * this process.
 *
 * An approval is first read into what it is about, named as the approval broker's rules
 * name side effects on every transport (`readApproval`): a command is `bash` with the
 * command line Codex would run (the script of its `/bin/bash -lc '…'` wrapper), a file
 * change is `edit` of each file it writes (one request per file: a rule about one path
 * must never be passed by a change that also writes another), extra permissions are
 * `request_permissions`, a network-only approval `network`.
 *
 * `ask` (the default) puts those to the parent's broker (`ctx.approvals`, `brokerAnswer`),
 * which decides by its rules or asks whoever is at the root of the tree, naming the child;
 * every part must be allowed. `decline` / `accept` answer every approval here, unasked, and
 * `ask` without a broker declines. "Always" is never passed on as Codex's own session-wide
 * approval: the broker remembers it, and Codex is told `accept` for this request only.
 *
 * Every decline is noted for the diagnostic, and a request we cannot answer gets a
 * JSON-RPC error at once: the server waits for an answer forever, so silence would hang
 * the turn.
 */
import { assertNever, isRecord } from '@dsh/base'
import type { Agent } from '@dsh/agent'
import type { ApprovalService } from '@dsh/approvals'
import type { PermissionLevel } from '@dsh/session'
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

/** `ask`: the parent's approval broker decides (declined without one); `decline` / `accept`: every approval, here. */
export type PermissionMode = 'ask' | 'decline' | 'accept'

export const PERMISSION_MODES: readonly PermissionMode[] = ['ask', 'decline', 'accept']

type ServerRequestAnswer =
  | { kind: 'result'; result: unknown; note?: string }
  | { kind: 'error'; code: number; message: string; note?: string }

type ServerRequestMethod = ServerRequest['method']

/** How an approval is answered: Codex's own words (`cancel` also stops the turn, which is stopping anyway). */
type CodexVerdict = 'accept' | 'decline' | 'cancel'

/** One side effect an approval is about, as the broker names it. */
interface CodexAsk {
  tool: string
  args: Record<string, unknown>
}

/** An approval request of the app-server, read. */
export interface CodexApproval {
  /** What to put to the broker, in order; every one must be allowed. Empty: Codex named nothing that could be asked about. */
  asks: CodexAsk[]
  /** The item it is about (Codex's id of the model's call). */
  callId?: string
  /** What it is, for a note: `command "touch a"`, `file change "/w/a.ts"`. */
  what: string
  /** The result to send for `verdict`; `reason` is why it was declined, where the wire carries one. */
  answer(verdict: CodexVerdict, reason?: string): unknown
}

/** The files a `fileChange` item announced (its `item/started`), by item id. */
type FileChangeLookup = (itemId: string) => readonly string[] | undefined

/**
 * An approval request read into what it is about, or `undefined` for a request that is
 * not an approval. `params` come off the wire: read defensively.
 */
export function readApproval(method: string, params: unknown, filesOf: FileChangeLookup = () => undefined): CodexApproval | undefined {
  const itemId = stringField(params, 'itemId')
  const callId = itemId ?? stringField(params, 'callId')
  const common = callId === undefined ? {} : { callId }
  switch (method) {
    case 'item/commandExecution/requestApproval': {
      const answer = (verdict: CodexVerdict): CommandExecutionRequestApprovalResponse => ({ decision: verdict })
      const raw = field(params, 'command')
      const cwd = stringField(params, 'cwd')
      if (typeof raw === 'string' && raw.trim() !== '') {
        const command = commandOfLine(raw)
        return { ...common, asks: [{ tool: 'bash', args: { command, ...(cwd !== undefined && { cwd }) } }], what: `command ${describe(command)}`, answer }
      }
      // A network-only approval names the host the command wants to reach, not the command.
      const network = field(params, 'networkApprovalContext')
      if (isRecord(network) && typeof network.host === 'string' && network.host !== '') {
        const protocol = typeof network.protocol === 'string' ? network.protocol : undefined
        return { ...common, asks: [{ tool: 'network', args: { host: network.host, ...(protocol !== undefined && { protocol }) } }], what: `network access to ${describe(network.host)}`, answer }
      }
      return { ...common, asks: [], what: 'command (unnamed)', answer }
    }
    case 'item/fileChange/requestApproval': {
      const answer = (verdict: CodexVerdict): FileChangeRequestApprovalResponse => ({ decision: verdict })
      const paths = itemId === undefined ? undefined : filesOf(itemId)
      return { ...common, ...fileChangeAsks(paths, stringField(params, 'grantRoot')), what: fileChangeWhat(paths, params), answer }
    }
    case 'item/permissions/requestApproval': {
      const asked = field(params, 'permissions')
      const reasonText = stringField(params, 'reason')
      // Declining grants nothing; accepting grants what was asked, for this turn only.
      const answer = (verdict: CodexVerdict): PermissionsRequestApprovalResponse => ({ permissions: verdict === 'accept' && isRecord(asked) ? withoutNulls(asked) : {}, scope: 'turn' })
      const asks = isRecord(asked) ? [{ tool: 'request_permissions', args: { permissions: withoutNulls(asked), ...(reasonText && { reason: reasonText }) } }] : []
      return { ...common, asks, what: `extra permissions${reason(params)}`, answer }
    }
    case 'execCommandApproval': {
      const argv = field(params, 'command')
      const command = Array.isArray(argv) && argv.length > 0 && argv.every((part) => typeof part === 'string') ? commandOfArgv(argv) : undefined
      const cwd = stringField(params, 'cwd')
      return {
        ...common,
        asks: command === undefined ? [] : [{ tool: 'bash', args: { command, ...(cwd !== undefined && { cwd }) } }],
        what: `command ${describe(command)}`,
        answer: (verdict, why): ExecCommandApprovalResponse => ({ decision: reviewDecision(verdict, why) }),
      }
    }
    case 'applyPatchApproval': {
      const changes = field(params, 'fileChanges')
      const paths = isRecord(changes) ? Object.keys(changes) : undefined
      return {
        ...common,
        ...fileChangeAsks(paths, stringField(params, 'grantRoot')),
        what: paths === undefined ? `patch${reason(params)}` : `patch ${describe(paths.join(', '))}${reason(params)}`,
        answer: (verdict, why): ApplyPatchApprovalResponse => ({ decision: reviewDecision(verdict, why) }),
      }
    }
    default:
      return undefined
  }
}

/**
 * The answer to one server request without a broker: approvals by `mode` (`ask` with
 * nobody to ask declines), everything else as the provider always answers it.
 */
export function answerServerRequest(method: string, params: unknown, mode: PermissionMode, filesOf?: FileChangeLookup): ServerRequestAnswer {
  if (!isKnownMethod(method)) {
    return { kind: 'error', code: METHOD_NOT_FOUND, message: `the dsh codex provider does not handle ${method}`, note: `refused unknown request ${method}` }
  }
  switch (method) {
    case 'item/commandExecution/requestApproval':
    case 'item/fileChange/requestApproval':
    case 'item/permissions/requestApproval':
    case 'execCommandApproval':
    case 'applyPatchApproval': {
      const approval = readApproval(method, params, filesOf)!
      if (mode === 'accept') return { kind: 'result', result: approval.answer('accept') }
      return { kind: 'result', result: approval.answer('decline', declinedByMode(mode)), note: `declined ${approval.what}` }
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

/** Whose side effects a Codex child's approvals are, for the parent's broker. */
export interface ApprovalScope {
  /** The delegating agent, in this process. */
  parent: Agent
  /** The child as the path names it: `codex "review"`, or its helper's name. */
  name: string
  /** The child's permission levels beyond its parent's (its helper's, its process's rules). */
  levels?: readonly PermissionLevel[]
  /** A continuable child's id (its record's); a one-shot run's is `<provider>:<thread id>`, known once the thread is. */
  childId?: string
}

/** The broker's answer to one approval, as Codex is to be told it. */
interface BrokerAnswer {
  verdict: CodexVerdict
  /** Why it was declined: the broker's reason, which a legacy answer carries to the model. */
  reason?: string
  /** For the diagnostic. */
  note?: string
}

/**
 * Put `approval` to `broker`, part by part, until one is rejected. `signal` withdraws it
 * (the turn stops, the child closes, Codex clears the request): the answer is then
 * `cancel`, and anything still pending at the broker is rejected there. Never rejects.
 */
export async function brokerAnswer(approval: CodexApproval, broker: ApprovalService, scope: ApprovalScope, childId: string, signal: AbortSignal): Promise<BrokerAnswer> {
  if (approval.asks.length === 0) {
    return { verdict: 'decline', reason: 'codex did not say what it was about', note: `declined ${approval.what}: codex did not say what it was about, so nobody could be asked` }
  }
  for (const { tool, args } of approval.asks) {
    if (signal.aborted) return { verdict: 'cancel' }
    const decision = await broker.request({
      agent: scope.parent,
      tool,
      args,
      signal,
      ...(approval.callId !== undefined && { callId: approval.callId }),
      remote: { child: childId, name: scope.name, record: true, ...(scope.levels !== undefined && { levels: scope.levels }) },
    })
    if (signal.aborted) return { verdict: 'cancel' }
    if (decision.decision === 'reject') {
      const why = `${decision.by}: ${decision.reason}`
      return { verdict: 'decline', reason: why, note: `declined ${approval.what} (${why})` }
    }
  }
  return { verdict: 'accept' }
}

/**
 * The files each `fileChange` item announces in its `item/started`, kept until the item
 * completes: a file change approval names only the item, and the files are what it asks.
 */
export class FileChangePaths {
  private readonly byItem = new Map<string, readonly string[] | undefined>()

  constructor(private readonly limit = 256) {}

  observe(method: string, params: unknown): void {
    if (method !== 'item/started' && method !== 'item/completed') return
    const item = field(params, 'item')
    if (!isRecord(item) || item.type !== 'fileChange' || typeof item.id !== 'string') return
    if (method === 'item/completed') return void this.byItem.delete(item.id)
    const changes = item.changes
    // A change without a path cannot be named: the whole item is then asked about as unknown.
    const paths = Array.isArray(changes) && changes.every((change) => isRecord(change) && typeof change.path === 'string' && change.path !== '') ? changes.map((change) => (change as { path: string }).path) : undefined
    this.byItem.set(item.id, paths)
    while (this.byItem.size > this.limit) this.byItem.delete(this.byItem.keys().next().value!)
  }

  paths(itemId: string): readonly string[] | undefined {
    return this.byItem.get(itemId)
  }
}

/** One `edit` per distinct file, and one for the root a change asks to write under for the session. */
function fileChangeAsks(paths: readonly string[] | undefined, grantRoot: string | undefined): { asks: CodexAsk[] } {
  // Files Codex did not name cannot be asked about: nothing is asked, and it is declined.
  if (paths === undefined || paths.length === 0) return { asks: [] }
  const asks: CodexAsk[] = [...new Set(paths)].map((path) => ({ tool: 'edit', args: { path } }))
  if (grantRoot !== undefined && grantRoot !== '') asks.push({ tool: 'edit', args: { path: grantRoot, grantRoot: true } })
  return { asks }
}

function fileChangeWhat(paths: readonly string[] | undefined, params: unknown): string {
  return paths === undefined || paths.length === 0 ? `file change${reason(params)}` : `file change ${describe(paths.join(', '))}${reason(params)}`
}

function reviewDecision(verdict: CodexVerdict, why: string | undefined): ExecCommandApprovalResponse['decision'] {
  switch (verdict) {
    case 'accept':
      return 'approved'
    case 'decline':
      return { denied: { rejection: why ?? 'declined by the dsh codex provider' } }
    case 'cancel':
      return 'abort'
    default:
      return assertNever(verdict, 'codex verdict')
  }
}

function declinedByMode(mode: 'ask' | 'decline'): string {
  return mode === 'ask' ? 'declined by the dsh codex provider: nobody can be asked (no approval broker)' : 'declined by the dsh codex provider (permissionMode: decline)'
}

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

const SHELLS = new Set(['bash', 'sh', 'zsh', 'dash'])

/**
 * The command a shell runs for `argv`: the script of `<shell> -c|-lc <script>` (how Codex
 * runs every command), else the words joined as a shell would read them back.
 */
export function commandOfArgv(argv: readonly string[]): string {
  if (argv.length === 3) {
    const [shell, flag, script] = argv as [string, string, string]
    if (SHELLS.has(shell.slice(shell.lastIndexOf('/') + 1)) && (flag === '-c' || flag === '-lc')) return script
  }
  return argv.map(quoteWord).join(' ')
}

/**
 * The command of Codex's command line (`/bin/bash -lc 'npm test'` → `npm test`): unwrapped
 * only when the line is exactly a shell, its flag and one quoted script; anything else is
 * kept whole, so a rule never sees less than what runs.
 */
export function commandOfLine(line: string): string {
  const words = shellWords(line)
  return words !== undefined && words.length === 3 ? commandOfArgv(words) : line
}

/**
 * A command line split into words as a POSIX shell would (quotes and backslashes), or
 * `undefined` when it holds anything but words (an operator, a substitution, a
 * redirection, an unclosed quote): such a line is not a plain wrapper.
 */
function shellWords(line: string): string[] | undefined {
  const words: string[] = []
  let word = ''
  let inWord = false
  for (let index = 0; index < line.length; index++) {
    const char = line[index]!
    if (char === "'") {
      const end = line.indexOf("'", index + 1)
      if (end < 0) return undefined
      word += line.slice(index + 1, end)
      inWord = true
      index = end
    } else if (char === '"') {
      let closed = false
      for (index++; index < line.length; index++) {
        const inner = line[index]!
        if (inner === '"') {
          closed = true
          break
        }
        if (inner === '$' || inner === '`') return undefined
        if (inner === '\\' && index + 1 < line.length && '"\\$`\n'.includes(line[index + 1]!)) word += line[++index]!
        else word += inner
      }
      if (!closed) return undefined
      inWord = true
    } else if (char === '\\') {
      if (index + 1 >= line.length) return undefined
      word += line[++index]!
      inWord = true
    } else if (char === ' ' || char === '\t') {
      if (inWord) words.push(word)
      word = ''
      inWord = false
    } else if (';&|<>()$`\n*?[]{}~#'.includes(char)) {
      return undefined
    } else {
      word += char
      inWord = true
    }
  }
  if (inWord) words.push(word)
  return words
}

function quoteWord(word: string): string {
  return /^[A-Za-z0-9_./=:@%+,-]+$/.test(word) ? word : `'${word.replace(/'/g, `'\\''`)}'`
}

function field(params: unknown, name: string): unknown {
  return isRecord(params) ? params[name] : undefined
}

function stringField(params: unknown, name: string): string | undefined {
  const value = field(params, name)
  return typeof value === 'string' ? value : undefined
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
