/**
 * Defaulting in one place: the plugin config and one request resolve into the complete
 * spec of one run, and the spec into the SDK's query options. The run path reads only
 * the spec.
 */
import type { CanUseTool, Options, PermissionMode } from '@anthropic-ai/claude-agent-sdk'
import { traceEnvironment, type SubagentRequest } from '@dsh/subagent'
import { claudeCodeEnvironment, runningAsRoot } from './claude-code-environment.js'
import { shortJson, type Denial } from './outcome.js'

/**
 * How tool permission asks are answered. `deny` (the default) runs Claude Code in its
 * `default` mode and denies every ask; the SDK's other modes decide more calls
 * themselves, and whatever they would still ask about is denied too. There is nobody to
 * ask: a subagent has no human at its console.
 */
export type PermissionModeSetting = 'deny' | 'acceptEdits' | 'plan' | 'dontAsk' | 'auto' | 'bypassPermissions'

export const PERMISSION_MODES: readonly PermissionModeSetting[] = ['deny', 'acceptEdits', 'plan', 'dontAsk', 'auto', 'bypassPermissions']

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
}

export function resolveRunSpec(settings: ClaudeCodeSettings, request: Pick<SubagentRequest, 'parent' | 'agentOptions' | 'callId'>): ClaudeCodeRunSpec {
  const spec: ClaudeCodeRunSpec = {
    provider: settings.providerName,
    executable: settings.executable,
    cwd: settings.cwd ?? request.parent.session.header.cwd,
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
  return spec
}

/** The permission part of the query options, recording every denial in `denials`. */
export function permissionOptions(mode: PermissionModeSetting, denials: Denial[]): Pick<Options, 'permissionMode' | 'canUseTool' | 'allowDangerouslySkipPermissions'> {
  // Under bypass the SDK never consults canUseTool (and warns if one is given).
  if (mode === 'bypassPermissions') return { permissionMode: 'bypassPermissions', allowDangerouslySkipPermissions: true }
  const sdkMode: PermissionMode = mode === 'deny' ? 'default' : mode
  const canUseTool: CanUseTool = async (toolName, input, { toolUseID }) => {
    denials.push({ tool: toolName, toolUseId: toolUseID, input: shortJson(input) })
    return {
      behavior: 'deny',
      message: `Permission denied: this Claude Code session runs as a dsh subagent with permissionMode "${mode}", and nobody can approve tool use. Finish the task without ${toolName}, or say in your answer what you would need it for.`,
    }
  }
  return { permissionMode: sdkMode, canUseTool }
}
