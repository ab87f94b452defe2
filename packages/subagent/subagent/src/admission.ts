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
  refuseTooDeep(request)
}

/**
 * The absolute depth bound a delegation from `request.parent` must respect: the
 * request's own and the one the parent inherited (its header's `maxDepth`), whichever is
 * tighter. A bound set once holds for every descendant, in this process or another.
 */
export function effectiveMaxDepth(request: Pick<SubagentRequest, 'parent' | 'maxDepth'>): number | undefined {
  const inherited = request.parent.session.header.maxDepth
  if (inherited === undefined) return request.maxDepth
  return request.maxDepth === undefined ? inherited : Math.min(inherited, request.maxDepth)
}

/** `DEPTH_LIMIT` when a child of `request.parent` would be deeper than the effective bound. */
export function refuseTooDeep(request: Pick<SubagentRequest, 'parent' | 'maxDepth'>): void {
  const { parent } = request
  const depth = parent.depth + 1
  const maxDepth = effectiveMaxDepth(request)
  if (maxDepth !== undefined && depth > maxDepth) {
    const source = maxDepth === request.maxDepth ? '' : ` (inherited by ${parent.id} from its delegation)`
    throw new SubagentError(
      'DEPTH_LIMIT',
      `delegation depth limit reached: a child of ${parent.id} would be at depth ${depth}, above maxDepth ${maxDepth}${source}; do this work yourself instead of delegating`,
    )
  }
}

/** A parent that is disposing or disposed cannot own a child: it would outlive the parent's clean-up. */
export function refuseDisposedParent(parent: Agent): void {
  if (parent.status === 'disposing' || parent.status === 'disposed') {
    throw new SubagentError('PARENT_DISPOSED', `agent ${parent.id} is ${parent.status}: a disposed agent cannot delegate; start the work from a live agent`)
  }
}
