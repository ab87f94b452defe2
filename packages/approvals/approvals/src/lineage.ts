/**
 * What an agent's tree carries from where it was started: the names a path gives agents and
 * delegations, and, for a tree whose root here was delegated by a parent in another process
 * (`dsh acp`, `dsh a2a serve`, `dsh worker`), the permission levels and the approvals
 * default its lineage received, which bound what this process's own may allow.
 */
import type { Agent } from '@dsh/agent'
import { PERMISSION_RULE, type PermissionLevel } from '@dsh/session'
import { policyVerdict, type PolicyCall } from './rules.js'

/** With nobody to ask: what happens to a request no rule decided. */
export type DefaultDecision = 'reject' | 'allow'

/** What decides, with nobody to ask, in one tree (`ApprovalService.defaultFor`). */
export interface TreeDefault {
  decision: DefaultDecision
  /** Who decides, as a decision records it. */
  by: string
  /**
   * Why it rejects although this process's default allows: `lineage`, its lineage says its
   * root does not allow; `unsaid`, its lineage does not say (a parent older than the field).
   */
  bound?: 'lineage' | 'unsaid'
}

/** An agent as a path names it: `dsh` for a root, `spawn "survey"` or `reviewer "check"` for a child. */
export function agentName(agent: Agent): string {
  const { header } = agent.session
  if (agent.depth === 0 || header.parentSession === undefined) return header.origin === 'cli' || header.origin === undefined ? 'dsh' : `dsh ${header.origin}`
  return delegationName({ provider: header.provider ?? 'child', label: header.label, helper: header.helper?.name })
}

/** A delegation as a path names it: its helper's name, else its provider, then its label quoted. */
export function delegationName(delegation: { provider: string; label?: string | undefined; helper?: string | undefined }): string {
  const who = delegation.helper ?? delegation.provider
  return delegation.label ? `${who} "${delegation.label.slice(0, 60)}"` : who
}

/**
 * The levels the tree of `agent` received with its lineage, when its root here was
 * delegated by a parent in another process (`dsh acp`, `dsh a2a serve`, `dsh worker`):
 * its ancestors' rules. `undefined` for a tree rooted in this process.
 */
export function receivedLevels(agent: Agent): readonly PermissionLevel[] | undefined {
  const root = delegatedRoot(agent)
  return root === undefined ? undefined : root.session.header.permissions ?? []
}

/**
 * The `askUp` rule that makes a call of `agent` go up the tree, when its tree was delegated
 * by a parent in another process whose verdict sources (its `PreToolUse` hooks) take such
 * calls: that parent decides them itself, so no rule here may allow them unasked.
 */
export function receivedAskUp(agent: Agent, call: PolicyCall): string | undefined {
  const received = receivedLevels(agent)
  if (received === undefined || !received.some((level) => level.askUp !== undefined)) return undefined
  const asking = received.flatMap((level) => (level.askUp === undefined ? [] : [askUpAsAsk(level)]))
  const said = policyVerdict(asking, call)
  return said.verdict === 'ask' ? said.rule : undefined
}

/**
 * Whether any `askUp` rule `agent`'s tree received names `tool` (whatever its pattern): a
 * call of a tool without side effects is then put to the broker, which decides it whole.
 */
export function receivesAskUpFor(agent: Agent, tool: string): boolean {
  const received = receivedLevels(agent)
  if (received === undefined) return false
  const name = tool.toLowerCase()
  for (const level of received) {
    for (const rule of level.askUp ?? []) {
      const named = (PERMISSION_RULE.exec(rule)?.[1] ?? '*').toLowerCase()
      if (named === '*' || named === name || (named.endsWith('*') && name.startsWith(named.slice(0, -1)))) return true
    }
  }
  return false
}

/** A level's `askUp` rules read as `ask` rules, for matching only (cached per level). */
const asAsk = new WeakMap<PermissionLevel, PermissionLevel>()
function askUpAsAsk(level: PermissionLevel): PermissionLevel {
  let found = asAsk.get(level)
  if (found === undefined) {
    found = { from: level.from, ask: level.askUp ?? [] }
    asAsk.set(level, found)
  }
  return found
}

/** The root of `agent`'s tree, when that root here was delegated by a parent in another process. */
function delegatedRoot(agent: Agent): Agent | undefined {
  const root = agent.root
  return root.session.header.parentSession === undefined && root.depth === 0 ? undefined : root
}

/**
 * The approvals default the tree of `agent` received with its lineage: `unsaid` when the
 * lineage carried none, anything but `allow` read as `reject`; `undefined` for a tree
 * rooted in this process.
 */
export function receivedDefault(agent: Agent): DefaultDecision | 'unsaid' | undefined {
  const root = delegatedRoot(agent)
  if (root === undefined) return undefined
  const carried: unknown = root.session.header.approvalDefault
  return carried === undefined ? 'unsaid' : carried === 'allow' ? 'allow' : 'reject'
}

/** Why nobody's answer rejected a side effect, saying what to change when the lineage bounded an allowing default (`ownAllow` names it). */
export function unaskedReason(chosen: TreeDefault, ownAllow: string): string {
  switch (chosen.bound) {
    case 'lineage':
      return `nobody is there to ask, and the root of this delegation tree does not allow what no rule decides (the approvals default its lineage carried is reject), which ${ownAllow} here may not widen; allow it by a rule in the root's config, or start the root with --permission allow`
    case 'unsaid':
      return `nobody is there to ask, and this tree's lineage does not say what its root allows with nobody to ask (its parent runs an older dsh), so ${ownAllow} here does not apply to it; allow it by a rule in the root's config, or update the parent's dsh`
    default:
      return 'nobody is there to ask, and side effects are refused without an answer'
  }
}
