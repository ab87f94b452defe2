/**
 * The wording of what a continuable child tells its parent: the settlement notice (one
 * per settled turn, keyed by stop reason) and a report.
 */
import { assertNever, type StopReason } from '@dsh/base'
import { outputText, type TextBlock, type UserMessage } from '@dsh/llm'

/** The one-line outcome of a settled turn, by stop reason. */
export function settlementSummary(childId: string, stopReason: StopReason): string {
  switch (stopReason) {
    case 'completed':
      return `Subagent ${childId} finished its turn and is idle until you send it more work (send_message).`
    case 'aborted':
      return `Subagent ${childId} was stopped before it finished its turn; it keeps its history and can be sent more work.`
    case 'max-tokens':
      return `Subagent ${childId} ran out of room (max tokens) before finishing its turn.`
    case 'refusal':
      return `Subagent ${childId} declined its turn.`
    case 'error':
      return `Subagent ${childId} failed its turn.`
    case 'budget':
      return `Subagent ${childId} was stopped by a budget before it finished its turn (the diagnostic says which).`
    default:
      return assertNever(stopReason, 'stop reason')
  }
}

export function settlementNotice(childId: string, stopReason: StopReason, closing: readonly TextBlock[], diagnostic?: string): UserMessage {
  const lines = [settlementSummary(childId, stopReason)]
  if (diagnostic) lines.push(`Diagnostic: ${diagnostic}`)
  const text = outputText([...closing])
  lines.push(text ? `Its closing message:\n${text}` : 'It left no closing message.')
  return { role: 'user', content: [{ type: 'text', text: lines.join('\n') }] }
}

export function reportMessage(childId: string, output: readonly TextBlock[]): UserMessage {
  return { role: 'user', content: [{ type: 'text', text: `Background subagent ${childId} reported:\n${outputText([...output])}` }] }
}
