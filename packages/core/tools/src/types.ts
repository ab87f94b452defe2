import type { PermissionDecision } from '@dsh/base'
import type { TextBlock, ToolCallBlock, ToolResultBlock, ToolSpec } from '@dsh/llm'

/**
 * The agent a tool runs for. `@dsh/agent` widens this to its full `Agent` handle, so a
 * tool that delegates (or owns background work) reaches its caller without this package
 * depending on the agent layer.
 */
export interface ToolAgent {
  readonly id: string
}

export interface ToolExecution {
  /** Aborted when the call is cancelled (turn cancelled, agent disposed). */
  signal: AbortSignal
  callId: string
  agent: ToolAgent
}

/** What `execute` may return: plain text, or blocks with flags. */
export type ToolOutput =
  | string
  | {
      content: TextBlock[] | string
      isError?: boolean
      /** End the agent's turn once this step's results are logged (e.g. `structured_output`). */
      endsTurn?: boolean
      /**
       * Facts about the call for the session record, never shown to the model: logged with
       * the call's `tool/result` (the delegation tool records which child ran, and where its
       * own record lives). A small JSON object.
       */
      record?: Readonly<Record<string, unknown>>
    }

export interface ToolDefinition<Args = unknown> {
  /** Model-facing name: letters, digits, `_` and `-`, at most 64 characters. */
  name: string
  description: string
  /** JSON Schema (an object schema) for the arguments; validated before `execute`. */
  parameters: Record<string, unknown>
  /** Safe to run at the same time as neighbouring safe calls of the same assistant message. */
  concurrencySafe?: boolean
  /**
   * The tool acts on the world outside the conversation (runs commands, writes files,
   * sends messages): every call is put to the permission gates first (see
   * `ToolRegistry.addPermissionGate`). Default `false`.
   */
  sideEffecting?: boolean
  execute(args: Args, exec: ToolExecution): Promise<ToolOutput> | ToolOutput
}

/** Which tools an agent may see and call. Names must exist when the filter is applied. */
export interface ToolFilter {
  allow?: readonly string[]
  deny?: readonly string[]
}

export interface ToolCallOutcome {
  result: ToolResultBlock
  endsTurn: boolean
  /** How the permission gates decided on a side-effecting call; recorded with its result. */
  permission?: ToolPermissionDecision
  /** The tool's own facts for the record (`ToolOutput.record`). */
  record?: Readonly<Record<string, unknown>>
}

/**
 * A permission gate's answer: the one decision vocabulary of `@dsh/base`
 * (`allow-always` means the gate will allow the same call again without asking; `by` says
 * who decided, `source` what kind of decision it was, for the session record).
 */
export type ToolPermissionDecision = PermissionDecision

/** What a gate is asked: one validated call of a side-effecting tool (or one its `alsoFor` named), about to run. */
export interface ToolPermissionRequest {
  call: ToolCallBlock & { args: unknown }
  tool: Pick<ToolDefinition, 'name' | 'description'> & { sideEffecting: boolean }
  agent: ToolAgent
  /** The call's signal: a gate waiting on someone stops waiting when it aborts. */
  signal: AbortSignal
}

/**
 * Decides whether a side-effecting call may run. `undefined`: no opinion (the next gate
 * is asked; with no opinion at all the call runs). A gate that throws rejects the call.
 */
export type ToolPermissionGate = (request: ToolPermissionRequest) => Promise<ToolPermissionDecision | undefined> | ToolPermissionDecision | undefined

export type { ToolCallBlock, ToolSpec }
