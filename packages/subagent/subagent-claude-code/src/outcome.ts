/**
 * How a Claude Code run's messages become a `SubagentResult`. Pure functions over the
 * SDK's message types, so every mapping rule is testable without a process.
 */
import type { SDKAssistantMessage, SDKResultMessage } from '@anthropic-ai/claude-agent-sdk'
import type { AssistantMessage, TextBlock } from '@dsh/llm'
import type { StopReason } from '@dsh/base'
import { selectOutput, type SubagentResult } from '@dsh/subagent'

/** One tool permission ask the provider answered with a denial. */
export interface Denial {
  tool: string
  toolUseId?: string
  /** The tool input, JSON, shortened for the diagnostic. */
  input: string
}

/**
 * The text of a top-level assistant message (a Claude Code subagent's own messages carry
 * a `parent_tool_use_id` and are not the child's answer).
 */
export function assistantTextOf(message: SDKAssistantMessage): AssistantMessage | undefined {
  if (message.parent_tool_use_id !== null) return undefined
  const content: TextBlock[] = []
  for (const block of message.message.content) {
    if (block.type === 'text' && block.text.length > 0) content.push({ type: 'text', text: block.text })
  }
  return { role: 'assistant', content }
}

/**
 * The rule: a `result` of subtype `success` **and** `is_error: false` with non-blank text
 * is `completed`, with that text as the output. Everything else is `error` (Claude Code
 * reports an API failure as `success` with `is_error: true`, so both are checked), with
 * the partial output the child streamed. Denied permission asks are named in the
 * diagnostic either way, so a completed run that had to work around a denial says so.
 */
export function resultOf(result: SDKResultMessage, assistantMessages: readonly AssistantMessage[], denials: readonly Denial[]): SubagentResult {
  const denied = describeDenials(mergeDenials(denials, result.permission_denials))
  if (result.subtype === 'success' && !result.is_error && result.result.trim()) {
    return { output: [{ type: 'text', text: result.result }], stopReason: 'completed', ...(denied && { diagnostic: denied }) }
  }
  const facts = [`subtype ${result.subtype}`, `is_error ${result.is_error}`]
  if (result.subtype === 'success' && result.api_error_status != null) facts.push(`API status ${result.api_error_status}`)
  if (result.stop_reason) facts.push(`stop reason ${result.stop_reason}`)
  const detail =
    result.subtype === 'success'
      ? result.result.trim() || (result.is_error ? 'no error text' : 'the child finished without any text')
      : result.errors.join('; ') || 'no error text'
  const diagnostic = `Claude Code ended with an error result (${facts.join(', ')}): ${detail}${denied ? `; ${denied}` : ''}`
  return { output: selectOutput(assistantMessages), stopReason: 'error', diagnostic }
}

/**
 * Every end that is not a `result` message (cancel, crash, exit, timeout, transport
 * error): the partial output by the output selection rule, and the denials for the record.
 */
export function endingOf(stopReason: StopReason, diagnostic: string | undefined, assistantMessages: readonly AssistantMessage[], denials: readonly Denial[]): SubagentResult {
  const lines = [diagnostic, describeDenials(denials)].filter((line): line is string => !!line)
  const result: SubagentResult = { output: selectOutput(assistantMessages), stopReason }
  if (lines.length > 0) result.diagnostic = lines.join('; ')
  return result
}

/** Our own record plus the result's authoritative list (which also has denials no ask preceded, e.g. from rules). */
function mergeDenials(asked: readonly Denial[], reported: SDKResultMessage['permission_denials']): Denial[] {
  const merged = [...asked]
  const seen = new Set(asked.map((denial) => denial.toolUseId).filter(Boolean))
  for (const denial of reported ?? []) {
    if (seen.has(denial.tool_use_id)) continue
    merged.push({ tool: denial.tool_name, toolUseId: denial.tool_use_id, input: shortJson(denial.tool_input) })
  }
  return merged
}

function describeDenials(denials: readonly Denial[]): string | undefined {
  if (denials.length === 0) return undefined
  const list = denials.map((denial) => `${denial.tool} ${denial.input}`).join(', ')
  return `denied ${denials.length} tool permission ask${denials.length === 1 ? '' : 's'}: ${list}`
}

export function shortJson(value: unknown, max = 160): string {
  let json: string
  try {
    json = JSON.stringify(value) ?? String(value)
  } catch {
    // A cyclic or otherwise unserialisable input: its string form is description enough.
    json = String(value)
  }
  return json.length > max ? `${json.slice(0, max - 1)}…` : json
}
