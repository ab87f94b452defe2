import { assertNever } from '@dsh/base'
import type { PermissionOption, RequestPermissionResponse } from '@agentclientprotocol/sdk'

/** How the provider answers an agent's `session/request_permission`: nobody is there to ask. */
export type PermissionPolicy = 'reject' | 'allow'

/**
 * `reject`: the first reject option the agent offers; `allow`: the first allow option.
 * When the agent offers no option of that kind, or the turn is being cancelled, the
 * answer is `cancelled` (ACP's "no decision"), never an option of the opposite kind.
 */
export function answerPermission(policy: PermissionPolicy, options: readonly PermissionOption[], cancelling: boolean): RequestPermissionResponse {
  if (cancelling) return { outcome: { outcome: 'cancelled' } }
  const wanted = optionKinds(policy)
  const option = options.find((candidate) => wanted.includes(candidate.kind))
  return option ? { outcome: { outcome: 'selected', optionId: option.optionId } } : { outcome: { outcome: 'cancelled' } }
}

function optionKinds(policy: PermissionPolicy): readonly PermissionOption['kind'][] {
  switch (policy) {
    case 'reject':
      return ['reject_once', 'reject_always']
    case 'allow':
      return ['allow_once', 'allow_always']
    default:
      return assertNever(policy, 'permission policy')
  }
}
