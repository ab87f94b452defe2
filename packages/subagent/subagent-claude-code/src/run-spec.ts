/**
 * Defaulting in one place: the plugin config and one request resolve into the complete
 * spec of one run, and the spec into the SDK's query options. The run path reads only
 * the spec.
 */
import type { CanUseTool, McpServerConfig, Options, PermissionMode } from '@anthropic-ai/claude-agent-sdk'
import type { ApprovalService } from '@dsh/approvals'
import { traceEnvironment, type McpServerLookup, type SubagentRequest } from '@dsh/subagent'
import { brokerCanUseTool, type ApprovalScope, type BrokerRoute } from './approvals.js'
import { claudeCodeEnvironment, runningAsRoot } from './claude-code-environment.js'
import { shortJson, type Denial } from './outcome.js'

/**
 * How tool permission asks are answered. `ask` (the default) runs Claude Code in its
 * `default` mode and puts every ask to the parent's approval broker, which decides by its
 * rules or asks whoever is at the root of the tree (without a broker, `ask` denies, as
 * `deny` does). `deny` denies every ask: a subagent has no human at its console. The SDK's
 * other modes decide more calls themselves, and whatever they would still ask about is
 * denied too.
 */
export type PermissionModeSetting = 'ask' | 'deny' | 'acceptEdits' | 'plan' | 'dontAsk' | 'auto' | 'bypassPermissions'

export const PERMISSION_MODES: readonly PermissionModeSetting[] = ['ask', 'deny', 'acceptEdits', 'plan', 'dontAsk', 'auto', 'bypassPermissions']

/** The plugin config after schema defaults, as the provider needs it. */
export interface ClaudeCodeSettings {
  providerName: string
  env: Record<string, string>
  passEnv: string[]
  cwd?: string
  permissionMode: PermissionModeSetting
  model?: string
  timeoutMs?: number
  startTimeoutMs: number
  graceMs: number
  /** Absolute path of the binary, resolved at load. */
  executable: string
  /** Told why a progress message was dropped; the plugin logs it at debug level. */
  progressDropped?: (reason: string) => void
  /** The parent's approval broker, when one is composed (`permissionMode: ask` puts the asks to it). */
  approvals?: () => ApprovalService | undefined
  /** The parent's MCP client's server of a name (`ctx.mcpServers.resolve`), for a helper's `mcpServers`. */
  mcpServers?: McpServerLookup
}

export interface ClaudeCodeRunSpec {
  provider: string
  executable: string
  cwd: string
  env: Record<string, string>
  permissionMode: PermissionModeSetting
  model?: string
  timeoutMs?: number
  startTimeoutMs: number
  graceMs: number
  /**
   * A continuable child's session, persisted by Claude Code: `resume: false` starts it
   * under this id (`sessionId`), `resume: true` continues it (`resume`). Absent for a
   * one-shot run, which persists nothing.
   */
  session?: { id: string; resume: boolean }
  progressDropped?: (reason: string) => void
  /** The parent's approval broker, looked up when the turn starts. */
  approvals?: () => ApprovalService | undefined
  /** Whose side effects the turn's permission asks are, for the broker (absent: decided by the mode alone). */
  approvalScope?: ApprovalScope
  /** A helper's MCP servers, as the SDK's `mcpServers` option. */
  mcpServers?: Record<string, McpServerConfig>
}

export function resolveRunSpec(settings: ClaudeCodeSettings, request: Pick<SubagentRequest, 'parent' | 'agentOptions' | 'callId' | 'workingDirectory'>): ClaudeCodeRunSpec {
  const spec: ClaudeCodeRunSpec = {
    provider: settings.providerName,
    executable: settings.executable,
    // A workspace of its own (made by the service) wins over the configured and the parent's directory.
    cwd: request.workingDirectory?.cwd ?? settings.cwd ?? request.parent.session.header.cwd,
    // A traced delegation continues in Claude Code's own OpenTelemetry spans (TRACEPARENT).
    env: { ...claudeCodeEnvironment(process.env, { env: settings.env, passEnv: settings.passEnv, isRoot: runningAsRoot() }), ...traceEnvironment(request) },
    permissionMode: settings.permissionMode,
    startTimeoutMs: settings.startTimeoutMs,
    graceMs: settings.graceMs,
  }
  // A per-request model (the tool's `agentOptions.model`) wins over the configured one.
  const model = request.agentOptions?.model ?? settings.model
  if (model !== undefined) spec.model = model
  if (settings.timeoutMs !== undefined) spec.timeoutMs = settings.timeoutMs
  if (settings.progressDropped) spec.progressDropped = settings.progressDropped
  if (settings.approvals) spec.approvals = settings.approvals
  return spec
}

/**
 * The permission part of the query options, recording every denial in `denials`. In `ask`
 * mode with a `route` to the parent's broker, the broker answers each ask; otherwise every
 * ask the mode leaves is denied.
 */
export function permissionOptions(mode: PermissionModeSetting, denials: Denial[], route?: BrokerRoute): Pick<Options, 'permissionMode' | 'canUseTool' | 'allowDangerouslySkipPermissions'> {
  // Under bypass the SDK never consults canUseTool (and warns if one is given).
  if (mode === 'bypassPermissions') return { permissionMode: 'bypassPermissions', allowDangerouslySkipPermissions: true }
  // `default` is the mode in which Claude Code asks canUseTool about every call its rules do not allow.
  const sdkMode: PermissionMode = mode === 'deny' || mode === 'ask' ? 'default' : mode
  if (mode === 'ask' && route !== undefined) return { permissionMode: sdkMode, canUseTool: brokerCanUseTool(route, denials) }
  const why = mode === 'ask' ? 'permissionMode "ask", and no approval broker is composed above it, so nobody' : `permissionMode "${mode}", and nobody`
  const canUseTool: CanUseTool = async (toolName, input, { toolUseID }) => {
    denials.push({ tool: toolName, toolUseId: toolUseID, input: shortJson(input) })
    return {
      behavior: 'deny',
      message: `Permission denied: this Claude Code session runs as a dsh subagent with ${why} can approve tool use. Finish the task without ${toolName}, or say in your answer what you would need it for.`,
    }
  }
  return { permissionMode: sdkMode, canUseTool }
}
