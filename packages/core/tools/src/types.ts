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
    }

export interface ToolDefinition<Args = unknown> {
  /** Model-facing name: letters, digits, `_` and `-`, at most 64 characters. */
  name: string
  description: string
  /** JSON Schema (an object schema) for the arguments; validated before `execute`. */
  parameters: Record<string, unknown>
  /** Safe to run at the same time as neighbouring safe calls of the same assistant message. */
  concurrencySafe?: boolean
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
}

export type { ToolCallBlock, ToolSpec }
