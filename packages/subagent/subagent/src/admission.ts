/**
 * The checks every provider makes before it creates anything (an agent, a session, a
 * process): a cancelled delegation, a parent that is going away, and the depth bound.
 * Shared so that in-process and out-of-process children refuse in the same words.
 */
import { SubagentError } from './errors.js'
import type { Agent } from '@dsh/agent'
import type { SubagentRequest } from './types.js'

/** Throws the reason `request` must not start a child (`ABORTED`, `PARENT_DISPOSED`, `DEPTH_LIMIT`). */
export function refuseUnstartable(request: SubagentRequest, childName: string): void {
  const { parent, signal } = request
  if (signal.aborted) throw new SubagentError('ABORTED', `the delegation was cancelled before ${childName} was started`, { cause: signal.reason })
  refuseDisposedParent(parent)
  const depth = parent.depth + 1
  if (request.maxDepth !== undefined && depth > request.maxDepth) {
    throw new SubagentError(
      'DEPTH_LIMIT',
      `delegation depth limit reached: a child of ${parent.id} would be at depth ${depth}, above maxDepth ${request.maxDepth}; do this work yourself instead of delegating`,
    )
  }
}

/** A parent that is disposing or disposed cannot own a child: it would outlive the parent's clean-up. */
export function refuseDisposedParent(parent: Agent): void {
  if (parent.status === 'disposing' || parent.status === 'disposed') {
    throw new SubagentError('PARENT_DISPOSED', `agent ${parent.id} is ${parent.status}: a disposed agent cannot delegate; start the work from a live agent`)
  }
}
