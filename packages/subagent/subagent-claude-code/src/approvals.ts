/**
 * How Claude Code's permission asks reach the parent's approval broker (`@dsh/approvals`)
 * in `permissionMode: ask`: each ask of `canUseTool` is named as the broker's rules name
 * side effects on every transport (`Bash` is `bash` with its command, `Edit` / `Write` /
 * `MultiEdit` / `NotebookEdit` are `edit` with the file's path, any other tool its own
 * name with its input), put to the broker on behalf of the delegating agent, and the
 * broker's decision becomes the SDK's answer: allow with the input unchanged, or deny with
 * the broker's reason, which the model reads.
 */
import type { CanUseTool, PermissionResult } from '@anthropic-ai/claude-agent-sdk'
import type { Agent } from '@dsh/agent'
import type { ApprovalService } from '@dsh/approvals'
import type { PermissionLevel } from '@dsh/session'
import { shortJson, type Denial } from './outcome.js'

/** Whose side effects a Claude Code child's permission asks are, for the parent's broker. */
export interface ApprovalScope {
  /** The delegating agent, in this process. */
  parent: Agent
  /** The child as the path names it: `claude-code "review"`, or its helper's name. */
  name: string
  /** The child's permission levels beyond its parent's (its helper's, its process's rules). */
  levels?: readonly PermissionLevel[]
  /** A continuable child's id (its record's); a one-shot run's is `<provider>:<session id>`, known from Claude Code's init message. */
  childId?: string
}

/** One turn's way to the broker. */
export interface BrokerRoute {
  broker: ApprovalService
  scope: ApprovalScope
  /** The child id the broker names the asker by (what the live tree knows it as). */
  childId(): string
  /** Aborted when the turn stops (cancelled, timed out, settled): its asks still pending are withdrawn. */
  withdrawn: AbortSignal
}

/** A Claude Code tool call as the broker names it. */
interface BrokerCall {
  tool: string
  args: Record<string, unknown>
}

const FILE_TOOLS = new Set(['Edit', 'Write', 'MultiEdit', 'NotebookEdit'])

/**
 * `Bash` → `bash` with its command; the file tools → `edit` with the file's path; anything
 * else (`WebFetch`, an MCP tool, …) its own name with its input. An input without the field
 * the name promises is passed whole, so its subject is all of it, never less.
 */
export function brokerCall(toolName: string, input: Record<string, unknown>): BrokerCall {
  if (toolName === 'Bash') return { tool: 'bash', args: typeof input.command === 'string' ? { command: input.command } : input }
  if (FILE_TOOLS.has(toolName)) {
    const path = typeof input.file_path === 'string' ? input.file_path : input.notebook_path
    return { tool: 'edit', args: typeof path === 'string' ? { path } : input }
  }
  return { tool: toolName, args: input }
}

/** `canUseTool` asking the broker along `route`; every rejection is recorded in `denials`. */
export function brokerCanUseTool(route: BrokerRoute, denials: Denial[]): CanUseTool {
  return async (toolName, input, { signal, toolUseID }): Promise<PermissionResult> => {
    const { tool, args } = brokerCall(toolName, input)
    const { scope } = route
    const decision = await route.broker.request({
      agent: scope.parent,
      tool,
      args,
      // The SDK aborts its own signal when Claude Code withdraws the ask; the turn's, when the turn stops.
      signal: AbortSignal.any([signal, route.withdrawn]),
      callId: toolUseID,
      remote: { child: route.childId(), name: scope.name, record: true, ...(scope.levels !== undefined && { levels: scope.levels }) },
    })
    if (decision.decision !== 'reject') return { behavior: 'allow', updatedInput: input, toolUseID }
    denials.push({ tool: toolName, toolUseId: toolUseID, input: shortJson(input) })
    return {
      behavior: 'deny',
      message: `Permission denied by ${decision.by}: ${decision.reason}. Finish the task without this ${toolName} call, or say in your answer what you would need it for.`,
      toolUseID,
    }
  }
}
