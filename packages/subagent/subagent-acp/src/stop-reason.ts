import type { StopReason } from '@dsh/subagent'

/**
 * ACP's stop reason as the seam's. `max_turn_requests` and anything a newer agent might
 * send are failures: the contract's consumers treat only `completed` as an answer.
 */
export function stopReasonOf(acp: string): StopReason {
  switch (acp) {
    case 'end_turn':
      return 'completed'
    case 'max_tokens':
      return 'max-tokens'
    case 'refusal':
      return 'refusal'
    case 'cancelled':
      return 'aborted'
    default:
      return 'error'
  }
}
