/**
 * How a side effect was decided: the one vocabulary of permission decisions, shared by
 * the tool registry's gates (`@dsh/tools`), the session record (`@dsh/session`) and the
 * approval broker (`@dsh/approvals`).
 */

/**
 * What kind of decision answered a permission request: a person (`user`), a rule of the
 * policy (`rule`), the policy's default with nobody to ask (`default`), an earlier
 * "always" answer (`remembered`), nobody answering in time (`timeout`), the call being
 * cancelled while asked (`cancelled`), a bound on pending requests (`limit`), or the
 * recording a replay follows (`replay`).
 */
export type PermissionSource = 'user' | 'rule' | 'default' | 'remembered' | 'timeout' | 'cancelled' | 'limit' | 'replay'

export const PERMISSION_SOURCES = ['user', 'rule', 'default', 'remembered', 'timeout', 'cancelled', 'limit', 'replay'] as const satisfies readonly PermissionSource[]

/** Where a decision came from, besides `by` (who, in a few words, for a person). */
export interface PermissionProvenance {
  source?: PermissionSource
  /** The rule that decided (`bash(npm test*)`), when a rule did. */
  rule?: string
  /** When it was decided, in milliseconds since the epoch. */
  at?: number
}

/**
 * A decision on one side effect. `allow-always` means whoever decided will allow the same
 * request again without asking; `by` says who decided, in a few words, for the record.
 */
export type PermissionDecision =
  | ({ decision: 'allow-once'; by: string } & PermissionProvenance)
  | ({ decision: 'allow-always'; by: string } & PermissionProvenance)
  | ({ decision: 'reject'; by: string; reason: string } & PermissionProvenance)

export const PERMISSION_DECISIONS = ['allow-once', 'allow-always', 'reject'] as const satisfies readonly PermissionDecision['decision'][]
