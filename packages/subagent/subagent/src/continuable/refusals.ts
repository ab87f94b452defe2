/** The refusals the continuation manager words the same way wherever it refuses. */
import type { Agent } from '@dsh/agent'
import { SubagentError } from '../errors.js'

export function assertParent(recordedParent: string | undefined, caller: Agent, childId: string): void {
  if (recordedParent !== caller.id) throw unauthorized(`agent ${caller.id} is not the parent of subagent ${childId}; only the agent that started it may send it messages`)
}

export function notResumable(childId: string, reason: string): SubagentError {
  return new SubagentError('NOT_RESUMABLE', `subagent ${childId} cannot be reached: ${reason}`)
}

export function unauthorized(message: string): SubagentError {
  return new SubagentError('UNAUTHORIZED', message)
}
