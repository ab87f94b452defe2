import { isAbsolute } from 'node:path'
import Schema from 'schemastery'
import { SubagentError, traceEnvironment, type SubagentRequest } from '@dsh/subagent'
import { childEnvironment } from '@dsh/process'
import type { ApprovalService } from '@dsh/approvals'
import { PERMISSION_MODES, type PermissionMode } from './approvals.js'
import type { CodexCommand } from './codex-binary.js'
import type { AskForApproval, SandboxMode, ThreadStartParams } from './protocol/index.js'
import type { JsonValue } from './protocol/serde_json/JsonValue.js'

export interface CodexConfig {
  providerName: string
  env: Record<string, string>
  passEnv: string[]
  cwd?: string
  permissionMode: PermissionMode
  timeoutMs?: number
  startupTimeoutMs: number
  graceMs: number
  model?: string
  modelRetryLimitMs: number
}

export const CodexConfig: Schema<Partial<CodexConfig>, CodexConfig> = Schema.object({
  providerName: Schema.string().min(1).default('codex').description('The name the provider registers under on ctx.subagents.'),
  env: Schema.dict(Schema.string(), Schema.string().pattern(/^[^=\0]+$/)).default({}).description('Variables added on top of the allow-listed environment of the app-server (e.g. CODEX_HOME).'),
  passEnv: Schema.array(Schema.string().min(1)).default([]).description('Parent variables to pass through beyond the base environment (PATH, HOME, locale, terminal, temp dirs), by exact name.'),
  cwd: Schema.string().min(1).description("The child's working directory (absolute); default: the parent session's cwd."),
  permissionMode: Schema.union([...PERMISSION_MODES]).default('ask').description("How Codex's approval requests are answered: ask the parent's approval broker (its rules, then whoever is at the root of the tree; declined without a broker), or decline / accept every one here."),
  timeoutMs: Schema.natural().min(1).description('Longest a turn may run before it is interrupted and ends `error`.'),
  startupTimeoutMs: Schema.natural().min(1).default(30_000).description('Longest the app-server may take from spawn to an accepted turn.'),
  graceMs: Schema.natural().default(2_000).description('Disposal: wait this long after closing stdin, and again after SIGTERM, before the next step.'),
  model: Schema.string().min(1).description('A Codex model slug overriding the model of Codex\'s own config.'),
  modelRetryLimitMs: Schema.natural().default(20_000).description('How long Codex may go on retrying a model that does not answer (unreachable, the network gone) before the turn fails with Codex\'s last error, counted from its first retry and checked at each one it reports; Codex alone waits for as long as it takes. 0: fail at the first retry.'),
}) as Schema<Partial<CodexConfig>, CodexConfig>

/** Config problems schemastery cannot express; thrown at load, naming the key. */
export function checkConfig(config: CodexConfig): void {
  if (config.cwd !== undefined && !isAbsolute(config.cwd)) {
    throw new SubagentError('INVALID_CONFIG', `@dsh/subagent-codex config.cwd must be an absolute path (got ${JSON.stringify(config.cwd)}); write it in full, e.g. /home/me/project`)
  }
}

/** Everything one run needs, with every default applied: the run path reads no config. */
export interface CodexRunSpec {
  /** The provider's registered name: the prefix of the run's child id. */
  provider: string
  command: CodexCommand
  cwd: string
  env: NodeJS.ProcessEnv
  permissionMode: PermissionMode
  approvalPolicy: AskForApproval
  sandbox: SandboxMode
  /** Who answers Codex's approvals: always this client (`user`), never a reviewer of Codex's own that a CODEX_HOME may configure. */
  approvalsReviewer: NonNullable<ThreadStartParams['approvalsReviewer']>
  model: string | undefined
  timeoutMs: number | undefined
  startupTimeoutMs: number
  graceMs: number
  /** How long Codex may retry a model that does not answer before the turn fails. */
  modelRetryLimitMs: number
  /** Told why a progress notification was dropped (an item without a type, …); the plugin logs it at debug level. */
  progressDropped?: (reason: string) => void
  /** The parent's approval broker, when one is composed (`permissionMode: ask` sends approvals there). */
  approvals?: () => ApprovalService | undefined
  /** The helper's MCP servers by name (kept in a continuable child's record, resolved again on its resume). */
  mcpServers?: readonly string[]
  /** Their entries as Codex's config overrides (`thread/start`'s and `thread/resume`'s `config`). */
  mcpConfig?: Record<string, JsonValue>
}

/**
 * `ask` and `decline` keep Codex asking about anything it does not trust (with Codex
 * 0.171.0's exec tool: every command, `ls` included, and every file change), inside a
 * read-only sandbox: the broker decides, or the answer is no. What is approved runs as
 * Codex runs an approved command, outside the sandbox. `accept` is Codex's own full-auto
 * preset, and whatever it still asks is approved.
 */
const MODE_POLICY: Record<PermissionMode, { approvalPolicy: AskForApproval; sandbox: SandboxMode }> = {
  ask: { approvalPolicy: 'untrusted', sandbox: 'read-only' },
  decline: { approvalPolicy: 'untrusted', sandbox: 'read-only' },
  accept: { approvalPolicy: 'on-request', sandbox: 'workspace-write' },
}

/** Where a child runs and the model it asked for: from a request, or from a resumed child's record. */
interface CodexRunTarget {
  cwd: string
  model?: string
  mcpServers?: readonly string[]
}

function targetOfRequest(config: CodexConfig, request: SubagentRequest): CodexRunTarget {
  const model = request.agentOptions?.model ?? config.model
  // A workspace of its own (made by the service) wins over the configured and the parent's directory.
  return { cwd: request.workingDirectory?.cwd ?? config.cwd ?? request.parent.session.header.cwd, ...(model !== undefined && { model }), ...(request.mcpServers !== undefined && { mcpServers: request.mcpServers }) }
}

export function resolveRunSpec(config: CodexConfig, request: SubagentRequest | CodexRunTarget, command: CodexCommand, parentEnv: NodeJS.ProcessEnv = process.env): CodexRunSpec {
  const target = 'parent' in request ? targetOfRequest(config, request) : request
  return {
    provider: config.providerName,
    command,
    cwd: target.cwd,
    // Codex finds its model, provider and login in CODEX_HOME: dsh's own is the one to use.
    // A traced delegation continues in Codex's own OpenTelemetry spans (TRACEPARENT).
    env: { ...childEnvironment(parentEnv, { env: config.env, passEnv: ['CODEX_HOME', ...config.passEnv], agentChild: true }), ...('parent' in request ? traceEnvironment(request) : {}) },
    permissionMode: config.permissionMode,
    ...MODE_POLICY[config.permissionMode],
    approvalsReviewer: 'user',
    model: target.model,
    ...(target.mcpServers !== undefined && target.mcpServers.length > 0 && { mcpServers: target.mcpServers }),
    timeoutMs: config.timeoutMs,
    startupTimeoutMs: config.startupTimeoutMs,
    graceMs: config.graceMs,
    modelRetryLimitMs: config.modelRetryLimitMs,
  }
}
