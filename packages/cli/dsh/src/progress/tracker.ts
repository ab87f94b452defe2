/**
 * The state behind live progress: one node per agent (the root and every delegated
 * child, nested by parent), fed only by `subagent/*` events (start, progress, end) and the
 * root's own session, never by a provider's internals: a child in this process and one in
 * another process (ACP, Codex, Claude Code, A2A) look the same. Renderers read it; it
 * never prints.
 */
import { assertNever, progressStateOfStop, STOP_REASONS, type ProgressState, type StopReason } from '@dsh/base'
import type { Context } from 'cordis'
import type { Agent } from '@dsh/agent'
import type { SessionUpdate } from '@dsh/session'
import type { ApprovalRequestInfo } from '@dsh/approvals'
import { addUsage, displayLine, noUsage, summariseArgs, type BudgetEvent, type SubagentProgress, type SubagentProgressInfo, type SubagentQueuedInfo, type SubagentRunEndInfo, type SubagentRunInfo, type SubagentUsage } from '@dsh/subagent'
import { compactArgs } from './compact-args.js'

export type NodeState = ProgressState

export interface ProgressNode {
  id: string
  /** `root` for the agent the command runs, else the subagent provider. */
  provider: string
  /** The agent definition the child runs, when a helper tool started it. */
  helper?: string
  label?: string
  parentId?: string
  state: NodeState
  startedAt: number
  endedAt?: number
  stopReason?: string
  diagnostic?: string
  /**
   * What the agent is doing now, in a few words: the tool it is in with its shortened
   * arguments (`bash ls -la`), `writing`, `thinking`, or its status line.
   */
  activity?: string
  /** Its token usage so far (a child's latest progress, then its `subagent/end`; the root's own log). */
  usage?: SubagentUsage
  /** Tool calls started and not ended yet, by call id, with their activity text (oldest first). */
  openTools: Map<string, string>
  /** A continuable child between turns: it answered and waits for more work. */
  idle?: boolean
  /**
   * What it, or an agent below it, waits for an approval of (`bash npm test`), while a
   * request is pending at the broker (`approval/pending` until `approval/settled`).
   */
  waiting?: string
  /** A delegation waiting for a slot of its tree's cap: no child exists yet (`subagent/queued`). */
  queued?: boolean
  children: string[]
}

/**
 * - `start` / `end`: a run of the node began or settled;
 * - `step`: its activity or usage changed;
 * - `tool`: it began a tool call (`args`: the one-line summary), once per call.
 */
export type ProgressChange =
  | { kind: 'start' | 'end'; node: ProgressNode }
  | { kind: 'step'; node: ProgressNode }
  | { kind: 'tool'; node: ProgressNode; name: string; args?: string }
  /** A delegation began to wait for a slot (its node is `queued` until it starts or goes). */
  | { kind: 'queued'; node: ProgressNode }
  /** A budget of the tree: a limit near, spent, or a child stopped by its own (`text` says which). */
  | { kind: 'budget'; node: ProgressNode; text: string; event: BudgetEvent }

/** A reason the tree has no word for (a newer provider's) is a failure. */
export function stateOf(stopReason: string): NodeState {
  return (STOP_REASONS as readonly string[]).includes(stopReason) ? progressStateOfStop(stopReason as StopReason) : 'failed'
}

export class ProgressTracker {
  readonly nodes = new Map<string, ProgressNode>()
  private unsubscribe: Array<() => void> = []
  private listeners: Array<(change: ProgressChange) => void> = []

  constructor(ctx: Context, readonly root: Agent, private readonly now: () => number = Date.now) {
    this.nodes.set(root.id, { id: root.id, provider: 'root', state: 'running', startedAt: now(), children: [], openTools: new Map() })
    this.followRoot()
    this.unsubscribe.push(ctx.on('subagent/start', (info) => this.started(info)))
    // Listening is what makes children report: with no tracker (--quiet) nothing is built.
    this.unsubscribe.push(ctx.on('subagent/progress', (info) => this.progressed(info)))
    this.unsubscribe.push(ctx.on('subagent/end', (info) => this.ended(info)))
    // A delegation waiting for a slot is in the tree as queued until it starts (or goes).
    this.unsubscribe.push(ctx.on('subagent/queued', (info) => this.queuedChange(info)))
    // Budget warnings and stops are said once, on the tree's root or the child stopped.
    this.unsubscribe.push(ctx.on('subagent/budget', (event) => {
      const node = this.nodes.get(event.childId ?? '') ?? this.nodes.get(this.root.id)!
      this.emit({ kind: 'budget', node, text: displayLine(event.text), event })
    }))
    // Approvals: a child waiting for one says so until it is answered (none without a broker).
    this.unsubscribe.push(ctx.on('approval/pending', (request) => this.waitingFor(request, true)))
    this.unsubscribe.push(ctx.on('approval/settled', ({ request }) => this.waitingFor(request, false)))
  }

  /** Queued delegations' nodes, by parent and tool call (a delegation without a call gets a counter). */
  private readonly queuedNodes = new Map<string, string>()
  private queuedCounter = 0

  private queuedChange(info: SubagentQueuedInfo): void {
    const key = `${info.parentId}\0${info.callId ?? ''}`
    if (info.queued) {
      const id = `queued-${++this.queuedCounter}`
      const node: ProgressNode = { id, provider: info.provider, parentId: info.parentId, state: 'running', queued: true, startedAt: this.now(), children: [], openTools: new Map() }
      if (info.label !== undefined) node.label = displayLine(info.label)
      if (info.helper !== undefined) node.helper = displayLine(info.helper)
      this.nodes.set(id, node)
      this.queuedNodes.set(key, id)
      this.nodes.get(info.parentId)?.children.push(id)
      this.emit({ kind: 'queued', node })
      return
    }
    const id = this.queuedNodes.get(key)
    if (id === undefined) return
    this.queuedNodes.delete(key)
    const node = this.nodes.get(id)!
    this.nodes.delete(id)
    const parent = this.nodes.get(info.parentId)
    if (parent) parent.children = parent.children.filter((child) => child !== id)
    this.emit({ kind: 'step', node: parent ?? node })
  }

  /** Requests pending per node id, so a node waits as long as any of its requests does. */
  private readonly pendingApprovals = new Map<string, Map<string, string>>()

  /** Mark (or unmark) the deepest agent of `request`'s chain this tree knows as waiting for it. */
  private waitingFor(request: ApprovalRequestInfo, pending: boolean): void {
    const id = [...request.chain].reverse().find((candidate) => this.nodes.has(candidate))
    if (id === undefined) return
    const node = this.nodes.get(id)!
    let waits = this.pendingApprovals.get(id)
    if (pending) {
      if (!waits) this.pendingApprovals.set(id, (waits = new Map()))
      waits.set(request.id, displayLine(`${request.tool} ${request.display}`))
    } else {
      waits?.delete(request.id)
      if (waits?.size === 0) this.pendingApprovals.delete(id)
    }
    const now = this.pendingApprovals.get(id)
    const waiting = now && now.size > 0 ? [...now.values()].at(-1) : undefined
    if (waiting === node.waiting) return
    if (waiting === undefined) delete node.waiting
    else node.waiting = waiting
    this.emit({ kind: 'step', node })
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
      delete known.activity
      // Usage is per run: this turn's progress reports its own.
      delete known.usage
      known.openTools.clear()
      this.emit({ kind: 'start', node: known })
      return
    }
    const node: ProgressNode = { id: info.id, provider: info.provider, parentId: info.parentId, state: 'running', startedAt: this.now(), children: [], openTools: new Map() }
    // A label is the model's words and a diagnostic another process's: neither reaches the terminal raw.
    if (info.label !== undefined) node.label = displayLine(info.label)
    if (info.helper !== undefined) node.helper = displayLine(info.helper)
    this.nodes.set(info.id, node)
    this.nodes.get(info.parentId)?.children.push(info.id)
    this.emit({ kind: 'start', node })
  }

  /** A child's coalesced progress: its activity, the tools it is in, its usage so far. */
  private progressed(info: SubagentProgressInfo): void {
    const node = this.nodes.get(info.id)
    if (!node || node.state !== 'running') return
    const before = `${node.activity}|${node.usage?.inputTokens}|${node.usage?.outputTokens}`
    for (const update of info.updates) {
      const tool = applyProgress(node, update)
      if (tool) this.emit({ kind: 'tool', node, name: tool.name, ...(tool.args !== undefined && { args: tool.args }) })
    }
    if (`${node.activity}|${node.usage?.inputTokens}|${node.usage?.outputTokens}` !== before) this.emit({ kind: 'step', node })
  }

  private ended(info: SubagentRunEndInfo): void {
    const node = this.nodes.get(info.id)
    if (!node) return
    node.state = stateOf(info.stopReason)
    node.stopReason = info.stopReason
    if (info.diagnostic !== undefined) node.diagnostic = displayLine(info.diagnostic)
    node.endedAt = this.now()
    if (info.usage) node.usage = info.usage
    node.openTools.clear()
    delete node.activity
    if (info.continuable) node.idle = true
    this.emit({ kind: 'end', node })
  }

  /** The root is no subagent run: its own session says what it does and what it used. */
  private followRoot(): void {
    const node = this.nodes.get(this.root.id)!
    this.unsubscribe.push(
      this.root.session.subscribe((update: SessionUpdate) => {
        const before = `${node.activity}|${node.usage?.inputTokens}`
        applyRootUpdate(node, update)
        if (`${node.activity}|${node.usage?.inputTokens}` !== before) this.emit({ kind: 'step', node })
      }),
    )
  }

  private emit(change: ProgressChange): void {
    for (const listener of this.listeners) listener(change)
  }
}

/** A tool call as an activity: its name and its arguments as a person reads them. */
export function toolActivity(name: string, args: string | undefined): string {
  const shown = args === undefined ? '' : compactArgs(args)
  // Tool names come from a model or another process too: one clean line, like the arguments.
  const tool = displayLine(name)
  return shown ? `${tool} ${shown}` : tool
}

/** Open tool calls remembered per agent: a transport that never reports the ends cannot grow it. */
const MAX_OPEN_TOOLS = 32

function openTool(node: ProgressNode, callId: string, activity: string): void {
  node.openTools.set(callId, activity)
  if (node.openTools.size > MAX_OPEN_TOOLS) node.openTools.delete(node.openTools.keys().next().value!)
}

/** What one progress update changes on a child's node; the tool call it began, if any. */
function applyProgress(node: ProgressNode, update: SubagentProgress): { name: string; args?: string } | undefined {
  switch (update.kind) {
    case 'text':
      if (update.text.trim()) node.activity = 'writing'
      return undefined
    case 'tool-start':
      openTool(node, update.callId, toolActivity(update.name, update.args))
      node.activity = node.openTools.get(update.callId)
      return { name: displayLine(update.name), ...(update.args !== undefined && { args: displayLine(update.args) }) }
    case 'tool-end': {
      node.openTools.delete(update.callId)
      // Parallel calls: the one still running is what the child is in.
      const stillOpen = [...node.openTools.values()].at(-1)
      node.activity = stillOpen ?? `${displayLine(update.name)} ${update.ok ? 'done' : 'failed'}`
      return undefined
    }
    case 'status':
      node.activity = displayLine(update.text)
      return undefined
    case 'usage':
      node.usage = update.usage
      return undefined
    default:
      return assertNever(update, 'subagent progress')
  }
}

/** What one of the root's session updates changes on its node. */
function applyRootUpdate(node: ProgressNode, update: SessionUpdate): void {
  switch (update.type) {
    case 'assistant/chunk':
      node.activity = update.kind === 'reasoning' ? 'thinking' : 'writing'
      return
    case 'tool/call':
      openTool(node, update.call.id, toolActivity(update.call.name, summariseArgs(update.call.args ?? update.call.rawArgs ?? {})))
      node.activity = node.openTools.get(update.call.id)
      return
    case 'tool/result': {
      node.openTools.delete(update.result.callId)
      const stillOpen = [...node.openTools.values()].at(-1)
      node.activity = stillOpen ?? `${displayLine(update.result.name)} ${update.result.isError ? 'failed' : 'done'}`
      return
    }
    case 'assistant/message':
      // A fresh object each time: a renderer may hold the previous one.
      if (update.usage) node.usage = addUsage({ ...(node.usage ?? noUsage()) }, update.usage)
      return
    case 'turn/end':
      node.openTools.clear()
      delete node.activity
      return
    case 'step/start':
    case 'turn/start':
    case 'user/message':
    case 'step/end':
    case 'input/queued':
    case 'input/taken':
    case 'approval':
    case 'hook/run':
      return
    default:
      return assertNever(update, 'session update')
  }
}
