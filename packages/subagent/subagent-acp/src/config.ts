import type { DescendantEvent, ReportedDescendant } from './descendant.js'
import { resolve } from 'node:path'
import { childEnvironment } from '@dsh/process'
import Schema from 'schemastery'
import type { RecordingLink } from '@dsh/llm'
import type { ApprovalService, PermissionPolicy } from './permission.js'
import type { Agent } from '@dsh/agent'
import type { BashService } from '@dsh/bash'
import { DEFAULT_MAX_FRAME_BYTES } from './frame-limit.js'
import type { McpServerTable } from './mcp-servers.js'

/** The plugin's config, as written in a composition file. */
export interface AcpProviderConfig {
  providerName: string
  command: string
  args: string[]
  cwd?: string
  env: Record<string, string>
  passEnv: string[]
  permission: PermissionPolicy
  timeoutMs?: number
  startupTimeoutMs: number
  cancelGraceMs: number
  stdinGraceMs: number
  termGraceMs: number
  maxFrameBytes: number
  sharedWorkspace: boolean
  maxTerminals: number
}

const milliseconds = () => Schema.natural().min(1)

export const AcpProviderConfig: Schema<AcpProviderConfig> = Schema.object({
  providerName: Schema.string().min(1).default('acp').description('The name the provider registers under on ctx.subagents.'),
  command: Schema.string().min(1).required().description('The ACP agent program to run for each delegation (looked up on PATH).'),
  args: Schema.array(Schema.string()).default([]).description('Its arguments.'),
  cwd: Schema.string().min(1).description('Its working directory (and the ACP session cwd); default: the delegating session\'s cwd.'),
  env: Schema.dict(Schema.string(), Schema.string().pattern(/^[^=\0]+$/)).default({}).description('Variables added to the cleaned parent environment.'),
  passEnv: Schema.array(Schema.string().min(1).pattern(/^[^=\0]+$/)).default([]).description('Parent variables the agent inherits beyond the base environment (PATH, HOME, locale, terminal, temp dirs), by exact name: an API key its model needs.'),
  permission: Schema.union(['ask', 'reject', 'allow']).default('ask').description("How the agent's session/request_permission is answered: ask the parent's approval broker (its rules, then whoever is at the root of the tree), or reject / allow every request here."),
  timeoutMs: milliseconds().description('Longest a prompt turn may run; on expiry the run ends error and the agent is stopped.'),
  startupTimeoutMs: milliseconds().default(15_000).description('Longest initialize + session/new may take.'),
  cancelGraceMs: milliseconds().default(5_000).description('After session/cancel, how long the agent has to answer cancelled.'),
  stdinGraceMs: milliseconds().default(3_000).description('On dispose, how long the agent has to exit after its stdin closes.'),
  termGraceMs: milliseconds().default(2_000).description('After SIGTERM, how long before SIGKILL.'),
  maxFrameBytes: Schema.natural().min(1024).default(DEFAULT_MAX_FRAME_BYTES).description('The longest ACP frame (one line) either way: a longer update from the agent ends the run error; a longer prompt is refused before the agent starts.'),
  sharedWorkspace: Schema.boolean().default(false).description("Offer the agent this process's fs and terminal (ACP client capabilities): it reads and writes files and runs commands in its working directory through the parent, every write and command decided by the parent's approval broker, paths outside refused."),
  maxTerminals: Schema.natural().min(1).default(8).description('With sharedWorkspace: the most terminals one agent may hold open (created and not yet released).'),
}) as Schema<AcpProviderConfig>

/** Everything a run needs, with every default applied and paths made absolute. */
export interface AcpRunSpec {
  provider: string
  /** The recording link a child of `parentSession` started by `callId` is given (`ctx.llm.childRecordingLink`). */
  recordingLink?: (parentSession: string, callId: string | undefined) => RecordingLink | undefined
  /** Told why a progress update from the agent was dropped (an unknown tool call, a malformed field); the plugin logs it at debug level. */
  progressDropped?: (reason: string) => void
  /** One run's: told of each descendant its `dsh acp` child names (`_meta.dsh.descendant`, see `descendant.ts`). */
  descendant?: (info: ReportedDescendant) => void
  /** The plugin's: told of those descendants with the child they came through; emitted as `subagent/descendant`. */
  descendantBelow?: (info: DescendantEvent) => void
  /** The parent's approval broker, when it has one (`permission: ask` sends requests there). */
  approvals?: () => ApprovalService | undefined
  /** This process's bash executor seam (`ctx.bash`): runs the terminals of a shared workspace. */
  bash?: () => BashService | undefined
  /** An agent of this process by id (a continuable child's parent, when it is resumed). */
  agent?: (id: string) => Agent | undefined
  /** This process's configured MCP servers (`ctx.mcpServers` of `@dsh/mcp`, when composed), for `session/new`'s `mcpServers`. */
  mcpServers?: () => McpServerTable | undefined
  /** Told each one-line warning about a server not sent (the plugin logs it); never a value of one. */
  warn?: (line: string) => void
  command: string
  args: readonly string[]
  /** Absolute; `undefined` means the parent session's cwd. */
  cwd: string | undefined
  env: Readonly<Record<string, string>>
  /** Parent variables passed through by exact name (see `acpChildEnvironment`). */
  passEnv: readonly string[]
  permission: PermissionPolicy
  timeoutMs: number | undefined
  startupTimeoutMs: number
  cancelGraceMs: number
  stdinGraceMs: number
  termGraceMs: number
  maxFrameBytes: number
  /** Serve the agent's `fs/*` and `terminal/*` requests in its working directory (see `shared-workspace.ts`). */
  sharedWorkspace: boolean
  /** Terminals one agent may hold open at once. */
  maxTerminals: number
}

/** The one place defaults meet config: a configured relative `cwd` is taken from the process cwd at load. */
export function resolveAcpSpec(config: AcpProviderConfig): AcpRunSpec {
  return {
    provider: config.providerName,
    command: config.command,
    args: [...config.args],
    cwd: config.cwd === undefined ? undefined : resolve(config.cwd),
    env: { ...config.env },
    passEnv: [...config.passEnv],
    permission: config.permission,
    timeoutMs: config.timeoutMs,
    startupTimeoutMs: config.startupTimeoutMs,
    cancelGraceMs: config.cancelGraceMs,
    stdinGraceMs: config.stdinGraceMs,
    termGraceMs: config.termGraceMs,
    maxFrameBytes: config.maxFrameBytes,
    sharedWorkspace: config.sharedWorkspace,
    maxTerminals: config.maxTerminals,
  }
}

/**
 * The agent's environment: the base variables, the `passEnv` names the parent has, then
 * `env` on top. Nothing else of the parent (other keys, tokens) reaches the agent.
 */
/**
 * The variable through which a parent grants its `dsh acp` child the directory of its
 * recording. A recording link arrives over ACP, from whoever speaks to the server; the
 * environment comes only from the process that started it. `dsh acp` adopts a link only
 * into the directory this names, so a client cannot make it write files by asking.
 */
export const RECORDING_DIR_ENV = 'DSH_RECORDING_DIR'

/** `spec` for a child whose session gets `link`: its environment grants the link's directory. */
export function withRecordingGrant(spec: AcpRunSpec, link: RecordingLink | undefined): AcpRunSpec {
  return link ? { ...spec, env: { ...spec.env, [RECORDING_DIR_ENV]: link.dir } } : spec
}

export function acpChildEnvironment(spec: Pick<AcpRunSpec, 'env' | 'passEnv'>, parentEnv: NodeJS.ProcessEnv = process.env): Record<string, string> {
  return childEnvironment(parentEnv, { env: spec.env, passEnv: spec.passEnv, agentChild: true })
}
