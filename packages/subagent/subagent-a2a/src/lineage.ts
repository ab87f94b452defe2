import type { SubagentRequest } from '@dsh/subagent'

/**
 * What a dsh parent tells an A2A worker about itself, in the message's `metadata.dsh`
 * (the same fields `dsh acp` reads from `_meta.dsh`): `dsh a2a serve` records them in the
 * task's session header, so session trees and the depth bound reach across hosts. Other
 * agents ignore metadata they do not know.
 */
export interface DshMessageLineage {
  parentSession: string
  /** The child's own depth: the parent's plus one. */
  delegationDepth: number
  provider: string
  label?: string
  /** The delegation's absolute depth bound, when it has one. */
  maxDepth?: number
}

export function messageLineage(request: SubagentRequest, provider: string): DshMessageLineage {
  const lineage: DshMessageLineage = { parentSession: request.parent.id, delegationDepth: request.parent.depth + 1, provider }
  if (request.label !== undefined) lineage.label = request.label
  if (request.maxDepth !== undefined) lineage.maxDepth = request.maxDepth
  return lineage
}
