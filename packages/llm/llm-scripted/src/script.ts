import type { FinishReason } from '@dsh/base'

/**
 * The script format as authors write it (YAML or JSON), and the compiled form the adapter
 * plays. `compileScript` turns the first into the second and is the only validator.
 */

export interface ScriptToolCall {
  tool: string
  /** Tool arguments; `{}` when omitted. */
  args?: Record<string, unknown>
}

export interface ScriptReply {
  /** Assistant text; `{{last_tool_result}}` is replaced with the latest tool result's text. */
  text?: string
  /** One tool call. */
  call?: ScriptToolCall
  /** Several tool calls in one response (parallel calls). */
  calls?: ScriptToolCall[]
  /** Fail this request with an `LlmError` carrying this message (a simulated provider error). */
  error?: string
  /** Wait this long before answering (abortable). */
  delay_ms?: number
  /**
   * The finish reason the response reports; default `tool-calls` when it has calls, else
   * `stop`. `length` (cut off) and `content-filter` (filtered) let a script exercise how a
   * turn ends on them.
   */
  finish?: FinishReason
}

export interface ScriptCondition {
  /** Regular expression tested against the session's own first prompt. */
  prompt?: string
  /** The session's delegation depth must equal this (0 = top-level session). */
  depth?: number
}

export interface ScriptRule {
  /** Omitted: the rule matches any session. */
  when?: ScriptCondition
  /** Consumed in order, one item per model request of a session bound to this rule. */
  reply: ScriptReply[]
}

export type Script = ScriptRule[] | { rules: ScriptRule[] }

export interface CompiledCall {
  name: string
  args: Record<string, unknown>
}

export interface CompiledReply {
  /**
   * The text split around `{{last_tool_result}}`: one part means no placeholder, so the
   * history need not be searched.
   */
  textParts?: string[]
  /** The text contains `{{tool_results}}`. */
  usesToolResults?: boolean
  /**
   * The text when it has no placeholder (`''` for none), and its stream pieces: worked out
   * when the script is compiled, since a fan-out plays one child reply many times.
   * Undefined when the text depends on the request.
   */
  fixedText?: string
  fixedPieces?: readonly string[]
  calls: CompiledCall[]
  /** Characters the calls count for in the reply's `outputTokens` (names and arguments as JSON). */
  callChars: number
  error?: string
  delayMs: number
  finish?: FinishReason
}

export interface CompiledRule {
  /** Position in the script, as in error paths (`rules[2]`). */
  index: number
  prompt?: RegExp
  depth?: number
  replies: CompiledReply[]
}

export interface CompiledScript {
  /** Where the script came from, for messages: a file path or `inline script "name"`. */
  source: string
  rules: CompiledRule[]
}
