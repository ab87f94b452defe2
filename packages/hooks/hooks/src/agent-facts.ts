/**
 * Who an event is about, as Codex now sends it with a hook's input: the agent's id, its
 * helper's name (`agent_type`) and its path from the root (`dsh/spawn "survey"/reviewer`),
 * named as the approval broker names agents, so a hook's log and an approval read alike.
 */
import { delegationName } from '@dsh/approvals'
import type { Session } from '@dsh/session'

export interface AgentFacts {
  sessionId: string
  /** The root session of the tree in this process: Claude Code's `session_id` is the conversation's. */
  rootSessionId: string
  agentId: string
  agentType?: string
  agentPath: string
  cwd: string
}

/** Bound on the walk up: a cycle in headers (never expected) cannot hang a hook. */
const MAX_DEPTH = 64

export function agentFacts(session: Session, lookup: (id: string) => Session | undefined): AgentFacts {
  const names: string[] = []
  let root = session
  for (let current: Session | undefined = session, depth = 0; current !== undefined && depth < MAX_DEPTH; depth++) {
    root = current
    names.unshift(nameOf(current))
    const parent: string | undefined = current.header.parentSession
    current = parent === undefined ? undefined : lookup(parent)
    if (parent !== undefined && current === undefined) names.unshift('…')
  }
  const helper = session.header.helper?.name
  return { sessionId: session.id, rootSessionId: root.id, agentId: session.id, ...(helper !== undefined && { agentType: helper }), agentPath: names.join('/'), cwd: session.header.cwd }
}

function nameOf(session: Session): string {
  const { header } = session
  if (header.parentSession === undefined) return header.origin === 'cli' || header.origin === undefined ? 'dsh' : `dsh ${header.origin}`
  return delegationName({ provider: header.provider ?? 'child', label: header.label, helper: header.helper?.name })
}
