/**
 * The state behind live progress: one node per agent (the root and every delegated
 * child, nested by parent), fed only by `subagent/*` lifecycle events and session
 * events, never by a provider's internals. Renderers read it; it never prints.
 */
import { assertNever, progressStateOfStop, STOP_REASONS, type ProgressState, type StopReason } from '@dsh/base'
import type { Context } from 'cordis'
import type { Agent } from '@dsh/agent'
import type { SessionUpdate } from '@dsh/session'
import type { SubagentRunEndInfo, SubagentRunInfo } from '@dsh/subagent'

export type NodeState = ProgressState

export interface ProgressNode {
  id: string
  /** `root` for the agent the command runs, else the subagent provider. */
  provider: string
  label?: string
  parentId?: string
  state: NodeState
  startedAt: number
  endedAt?: number
  stopReason?: string
  diagnostic?: string
  /** The latest thing the agent did, in a few words (`calling bash`, `writing`, …). */
  latest?: string
  /** A continuable child between turns: it answered and waits for more work. */
  idle?: boolean
  children: string[]
}

export type ProgressChange = { kind: 'start' | 'end'; node: ProgressNode } | { kind: 'step'; node: ProgressNode }

/** A reason the tree has no word for (a newer provider's) is a failure. */
export function stateOf(stopReason: string): NodeState {
  return (STOP_REASONS as readonly string[]).includes(stopReason) ? progressStateOfStop(stopReason as StopReason) : 'failed'
}

export class ProgressTracker {
  readonly nodes = new Map<string, ProgressNode>()
  private unsubscribe: Array<() => void> = []
  /** The agent object each node's session is followed through (a cold-resumed child is a new one). */
  private followed = new Map<string, Agent>()
  private listeners: Array<(change: ProgressChange) => void> = []

  constructor(private readonly ctx: Context, readonly root: Agent, private readonly now: () => number = Date.now) {
    this.nodes.set(root.id, { id: root.id, provider: 'root', state: 'running', startedAt: now(), children: [] })
    this.follow(root.id, root)
    this.unsubscribe.push(ctx.on('subagent/start', (info) => this.started(info)))
    this.unsubscribe.push(ctx.on('subagent/end', (info) => this.ended(info)))
  }

  onChange(listener: (change: ProgressChange) => void): void {
    this.listeners.push(listener)
  }

  /** Mark the root finished (the command's turn ended). */
  finishRoot(stopReason: string): void {
    const node = this.nodes.get(this.root.id)!
    node.state = stateOf(stopReason)
    node.stopReason = stopReason
    node.endedAt = this.now()
    this.emit({ kind: 'end', node })
  }

  /** Nodes in tree order (depth-first), with their depth. */
  walk(): Array<{ node: ProgressNode; depth: number; last: boolean[] }> {
    const out: Array<{ node: ProgressNode; depth: number; last: boolean[] }> = []
    const visit = (id: string, depth: number, last: boolean[]) => {
      const node = this.nodes.get(id)
      if (!node) return
      out.push({ node, depth, last })
      node.children.forEach((child, index) => visit(child, depth + 1, [...last, index === node.children.length - 1]))
    }
    visit(this.root.id, 0, [])
    return out
  }

  dispose(): void {
    for (const off of this.unsubscribe.splice(0)) off()
  }

  private started(info: SubagentRunInfo): void {
    const known = this.nodes.get(info.id)
    if (known && info.continuable) {
      // The next turn of a continuable child: the same node runs again.
      known.state = 'running'
      known.idle = false
      known.startedAt = this.now()
      delete known.endedAt
      delete known.stopReason
      delete known.diagnostic
      const agent = info.local ? this.ctx.get('agents')?.get(info.id) : undefined
      if (agent && this.followed.get(info.id) !== agent) this.follow(info.id, agent)
      this.emit({ kind: 'start', node: known })
      return
    }
    const node: ProgressNode = { id: info.id, provider: info.provider, parentId: info.parentId, state: 'running', startedAt: this.now(), children: [] }
    if (info.label !== undefined) node.label = info.label
    this.nodes.set(info.id, node)
    this.nodes.get(info.parentId)?.children.push(info.id)
    // A local child's own session tells what it is doing; a remote one only has its lifecycle.
    if (info.local) {
      const agent = this.ctx.get('agents')?.get(info.id)
      if (agent) this.follow(info.id, agent)
    } else node.latest = 'running remotely'
    this.emit({ kind: 'start', node })
  }

  private ended(info: SubagentRunEndInfo): void {
    const node = this.nodes.get(info.id)
    if (!node) return
    node.state = stateOf(info.stopReason)
    node.stopReason = info.stopReason
    if (info.diagnostic !== undefined) node.diagnostic = info.diagnostic
    node.endedAt = this.now()
    if (info.continuable) node.idle = true
    this.emit({ kind: 'end', node })
  }

  private follow(id: string, agent: Agent): void {
    this.followed.set(id, agent)
    this.unsubscribe.push(
      agent.session.subscribe((update: SessionUpdate) => {
        const latest = describe(update)
        const node = this.nodes.get(id)
        if (!latest || !node || node.latest === latest) return
        node.latest = latest
        this.emit({ kind: 'step', node })
      }),
    )
  }

  private emit(change: ProgressChange): void {
    for (const listener of this.listeners) listener(change)
  }
}

function describe(update: SessionUpdate): string | undefined {
  switch (update.type) {
    case 'assistant/chunk':
      return update.kind === 'reasoning' ? 'thinking' : 'writing'
    case 'step/start':
      return `step ${update.step}`
    case 'tool/call':
      return `calling ${update.call.name}`
    case 'tool/result':
      return update.result.isError ? `${update.result.name} failed` : `${update.result.name} done`
    case 'turn/end':
      return update.reason === 'completed' ? 'answered' : `ended ${update.reason}`
    case 'turn/start':
    case 'user/message':
    case 'assistant/message':
    case 'step/end':
      return undefined
    default:
      return assertNever(update, 'session update')
  }
}
