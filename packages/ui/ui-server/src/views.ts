/**
 * The JSON the page renders, built from the session index: the list of runs, one run's
 * tree (with a timeline: each session's start and end), and one session's transcript.
 * Text is passed as data, never as markup: the page puts it in the document with
 * `textContent` only, so hostile prompts and tool output are shown, not executed.
 *
 * States beyond how a session's last turn ended come from what the parent recorded (see
 * `background.ts`: a queued background child, one stopped by a budget) and, when the
 * running process serves the page (`LiveRun`), from it: a child waiting for an approval,
 * a child queued right now, a budget stop heard before its parent read it.
 */
import { isRecord } from '@dsh/base'
import type { SessionEvent, SessionHeader } from '@dsh/session'
import { truncateColumns } from '@dsh/subagent'
import { backgroundDelegations, budgetDiagnostic, type BackgroundDelegation } from './background.js'
import { megabytes, type IndexedSession, type SessionIndex } from './index-of-sessions.js'
import { delegationCalls, delegationOf } from './delegation-record.js'
import { askedOrder, byAsking, neverStartedReason, refusedDelegations } from './unstarted.js'
import type { LiveRun, PendingApproval } from './live.js'

/** Longest text of one transcript entry sent to the page. */
const MAX_ENTRY_CHARS = 20_000
/** How much of a run's prompt (its first line) the list of runs shows, in terminal columns. */
const PROMPT_COLUMNS = 100

/**
 * How a node stands: how its session's last turn ended (`running`, `completed`, `error`,
 * `aborted`, …, `idle` before any turn), or one of the states the broker and the budgets add.
 */
export type NodeState = string

/** The states the page shows beyond a turn's: waiting for an approval (live), queued for a slot, stopped by a budget, never started. */
const WAITING_FOR_APPROVAL = 'waiting-for-approval'
const QUEUED = 'queued'
const STOPPED_BY_BUDGET = 'stopped-by-budget'
const NOT_STARTED = 'not-started'

export interface NodeView {
  id: string
  parent?: string
  label?: string
  provider?: string
  helper?: string
  origin?: string
  depth: number
  state: NodeState
  /** Requests of this node waiting for an answer now (live only). */
  waiting?: Array<Pick<PendingApproval, 'id' | 'tool' | 'display'>>
  /** Why it stopped or never started: a budget's diagnostic (`budget: …`), or a task's status. */
  diagnostic?: string
  /** Its session file was larger than what dsh ui reads of one (or than what was left of the whole bound): what is shown is its beginning. */
  truncated?: string
  /** A background child with no session (queued, or never started): its task id in the parent's process. */
  task?: string
  /** A child that never started and has no session: the parent's tool call that asked for it. */
  call?: string
  startedAt: number
  endedAt?: number
  inputTokens: number
  outputTokens: number
  /** A child that keeps its own record elsewhere (an ACP child in another directory, an A2A or queue worker). */
  storedAt?: string
  children: NodeView[]
}

export interface RunView {
  id: string
  label?: string
  /** The first line of the run's first prompt, cut to `PROMPT_COLUMNS` (as data: the page shows it as text). */
  prompt?: string
  state: string
  startedAt: number
  endedAt?: number
  children: number
  inputTokens: number
  outputTokens: number
}

/** How the session's last turn ended (`running` while one is open, `idle` before any), with its error. */
function lastTurnState(events: readonly SessionEvent[]): { reason: string; error?: string } {
  let open = false
  let last: { reason: string; error?: string } = { reason: 'idle' }
  for (const event of events) {
    if (event.type === 'turn/start') open = true
    if (event.type === 'turn/end') {
      open = false
      last = { reason: event.reason, ...(event.error !== undefined && { error: event.error }) }
    }
  }
  return open ? { reason: 'running' } : last
}

/** A budget's diagnostic as the page shows it: `budget: …`. */
function budgetWords(diagnostic: string): string {
  return diagnostic.startsWith('budget:') ? diagnostic : `budget: ${diagnostic}`
}

function usageOf(events: readonly SessionEvent[]): { inputTokens: number; outputTokens: number } {
  let inputTokens = 0
  let outputTokens = 0
  for (const event of events) {
    if (event.type !== 'assistant/message' || !event.usage) continue
    inputTokens += event.usage.inputTokens
    outputTokens += event.usage.outputTokens
  }
  return { inputTokens, outputTokens }
}

/** The helper (agent definition) a child runs as, when its header names one. */
function helperOf(header: SessionHeader): string | undefined {
  const helper: unknown = header.helper
  return isRecord(helper) && typeof helper.name === 'string' ? helper.name : undefined
}

function times(session: IndexedSession, state: string): { startedAt: number; endedAt?: number } {
  const created = Date.parse(session.header.createdAt)
  const startedAt = Number.isFinite(created) ? created : (session.events[0]?.ts ?? 0)
  const last = session.events.at(-1)?.ts
  return state === 'running' || last === undefined ? { startedAt } : { startedAt, endedAt: last }
}

export class Views {
  constructor(
    private readonly index: SessionIndex,
    private readonly live?: LiveRun,
  ) {}

  private childrenByParent(): Map<string, IndexedSession[]> {
    const byParent = new Map<string, IndexedSession[]>()
    for (const session of this.index.all()) {
      const parent = session.header.parentSession
      if (parent === undefined) continue
      byParent.set(parent, [...(byParent.get(parent) ?? []), session])
    }
    return byParent
  }

  /** Every root here (a session with no parent, or whose parent is stored elsewhere), newest first. */
  runs(): RunView[] {
    const byParent = this.childrenByParent()
    const roots = this.index.all().filter((session) => session.header.parentSession === undefined || !this.index.get(session.header.parentSession))
    // Every node below the root: child sessions, children stored elsewhere, and those that never started.
    const count = (node: NodeView): number => node.children.reduce((sum, child) => sum + 1 + count(child), 0)
    return roots
      .map((session) => {
        const tree = this.node(session, byParent, 0)
        const total = sumTree(tree)
        const prompt = firstPromptLine(session.events)
        return { id: session.header.id, label: session.header.label, ...(prompt && { prompt }), state: tree.state, startedAt: tree.startedAt, endedAt: tree.endedAt, children: count(tree), ...total }
      })
      .sort((a, b) => b.startedAt - a.startedAt)
  }

  tree(id: string): NodeView | undefined {
    const session = this.index.get(id)
    return session && this.node(session, this.childrenByParent(), 0)
  }

  private node(session: IndexedSession, byParent: Map<string, IndexedSession[]>, depth: number, seen = new Set<string>()): NodeView {
    const { header, events } = session
    seen.add(header.id)
    const ended = lastTurnState(events)
    // A turn a budget stopped ends `budget`, its error saying which budget and what was used.
    const state = ended.reason === 'budget' ? STOPPED_BY_BUDGET : ended.reason
    const ownDiagnostic = ended.reason === 'budget' ? budgetWords(ended.error ?? 'a budget was spent') : undefined
    const local = (byParent.get(header.id) ?? []).filter((child) => !seen.has(child.header.id))
    const children = local.map((child) => this.node(child, byParent, depth + 1, seen))
    // The parent's call that asked for each child, where known (a remote child stored here, a `dsh acp` one, has it only in the parent's record): the children are listed in the order it asked.
    const askedBy = new Map<NodeView, string>()
    const recordedCalls = delegationCalls(events)
    local.forEach((child, index) => {
      const call = child.header.toolCallId ?? recordedCalls.get(child.header.id)
      if (call !== undefined) askedBy.set(children[index]!, call)
    })
    const here = new Set(local.map((child) => child.header.id))
    // Children the delegation tool recorded that keep their record elsewhere.
    for (const event of events) {
      if (event.type !== 'tool/result') continue
      const delegation = delegationOf(event.record)
      if (!delegation || delegation.local || here.has(delegation.childId) || this.index.get(delegation.childId)) continue
      // A remote child's id is `<provider>:<its own id>`; stored here after all (a `dsh acp` child sharing the directory), it is listed already.
      const ownId = delegation.childId.slice(delegation.childId.indexOf(':') + 1)
      if (here.has(ownId) || this.index.get(ownId)) continue
      here.add(delegation.childId)
      const away: NodeView = { id: delegation.childId, parent: header.id, provider: delegation.provider, depth: depth + 1, state: event.result.isError ? 'error' : 'completed', startedAt: event.ts, endedAt: event.ts, inputTokens: 0, outputTokens: 0, storedAt: delegation.storedAt ?? 'elsewhere', children: [] }
      askedBy.set(away, event.result.callId)
      children.push(away)
    }
    // Background children: those that never started (queued, refused) have no session; a started one's recorded end says whether a budget stopped it.
    const byCall = new Map(local.filter((child) => child.header.toolCallId !== undefined).map((child) => [child.header.toolCallId!, child.header.id]))
    const queuedLive = new Set(this.live?.queued().filter((task) => task.owner === header.id).map((task) => task.taskId))
    const background = backgroundDelegations(events)
    for (const delegation of background) {
      const childId = byCall.get(delegation.callId)
      if (childId !== undefined) {
        const child = children.find((node) => node.id === childId)
        if (child && delegation.budget !== undefined) markBudget(child, delegation.budget)
        continue
      }
      const unstarted = this.unstarted(header.id, depth + 1, delegation, state, queuedLive.delete(delegation.taskId))
      askedBy.set(unstarted, delegation.callId)
      children.push(unstarted)
    }
    // Delegations refused before their child started (a budget spent, the tree's queue full, the depth bound): the parent's result is all there is.
    for (const refused of refusedDelegations(events)) {
      children.push({
        id: `${header.id}/${refused.callId}`,
        parent: header.id,
        ...(refused.label !== undefined && { label: refused.label }),
        ...(refused.helper !== undefined && { helper: refused.helper }),
        depth: depth + 1,
        state: NOT_STARTED,
        diagnostic: budgetDiagnostic(refused.reason!) ?? refused.reason!,
        call: refused.callId,
        startedAt: refused.at,
        endedAt: refused.at,
        inputTokens: 0,
        outputTokens: 0,
        children: [],
      })
    }
    // Queued in the running process before the parent's file said so.
    for (const task of this.live?.queued() ?? []) {
      if (task.owner !== header.id || !queuedLive.has(task.taskId)) continue
      children.push({ id: `${header.id}/${task.taskId}`, parent: header.id, label: task.label, depth: depth + 1, state: QUEUED, task: task.taskId, startedAt: task.startedAt, inputTokens: 0, outputTokens: 0, children: [] })
    }
    // Foreground children whose result a budget ended.
    for (const [childId, diagnostic] of foregroundBudgetStops(events)) {
      const child = children.find((node) => node.id === childId || childId.endsWith(`:${node.id}`))
      if (child) markBudget(child, diagnostic)
    }
    for (const child of children) {
      const heard = this.live?.budgetStops().get(child.id)
      if (heard !== undefined && child.diagnostic === undefined) markBudget(child, heard)
    }
    for (const child of children) if (child.call !== undefined) askedBy.set(child, child.call)
    const order = byAsking(askedOrder(events))
    children.sort((a, b) => order({ call: askedBy.get(a), at: a.startedAt }, { call: askedBy.get(b), at: b.startedAt }))
    const node: NodeView = {
      id: header.id,
      ...(header.parentSession !== undefined && { parent: header.parentSession }),
      ...(header.label !== undefined && { label: header.label }),
      ...(header.provider !== undefined && { provider: header.provider }),
      ...(helperOf(header) !== undefined && { helper: helperOf(header) }),
      ...(header.origin !== undefined && { origin: header.origin }),
      depth,
      state,
      ...(ownDiagnostic !== undefined && { diagnostic: ownDiagnostic }),
      ...(session.truncated !== undefined && { truncated: truncationNote(session.truncated) }),
      ...times(session, state),
      ...usageOf(events),
      children,
    }
    if (this.live) this.markWaiting(node)
    return node
  }

  /**
   * A background child with no session: queued while its parent runs; never started (a
   * budget's or the queue's refusal, a kill while it waited, its parent's end), saying why;
   * or stopped by a budget after it started where it keeps no session here.
   */
  private unstarted(parent: string, depth: number, delegation: BackgroundDelegation, parentState: string, queuedNow: boolean): NodeView {
    const never = neverStartedReason(delegation)
    const state = never !== undefined ? NOT_STARTED : delegation.budget !== undefined ? STOPPED_BY_BUDGET : delegation.settled !== undefined ? NOT_STARTED : delegation.queued && (queuedNow || parentState === 'running') ? QUEUED : NOT_STARTED
    const diagnostic = delegation.budget ?? never ?? delegation.settled ?? (state === NOT_STARTED ? "still queued when its parent's session ended" : undefined)
    return {
      id: `${parent}/${delegation.taskId}`,
      parent,
      ...(delegation.label !== undefined && { label: delegation.label }),
      depth,
      state,
      ...(diagnostic !== undefined && { diagnostic }),
      task: delegation.taskId,
      startedAt: delegation.at,
      ...(state !== QUEUED && { endedAt: delegation.settledAt ?? delegation.at }),
      inputTokens: 0,
      outputTokens: 0,
      children: [],
    }
  }

  /** The node asking (itself, or as the parent of a remote child that has no node of its own) is waiting for an approval. */
  private markWaiting(node: NodeView): void {
    const pending = this.live!.pending()
    if (pending.length === 0) return
    const visit = (current: NodeView) => {
      const mine = pending.filter((request) => askerIs(request, current.id, current.children))
      if (mine.length > 0) {
        current.waiting = mine.map(({ id, tool, display }) => ({ id, tool, display }))
        if (current.state === 'running' || current.state === 'idle' || current.storedAt !== undefined) current.state = WAITING_FOR_APPROVAL
      }
      current.children.forEach(visit)
    }
    visit(node)
  }

  /** One session's transcript as entries the page lists in order. */
  transcript(id: string): { header: SessionHeader; entries: Array<Record<string, unknown>>; truncated?: string } | undefined {
    const session = this.index.get(id)
    if (!session) return undefined
    const cut = (text: string) => (text.length > MAX_ENTRY_CHARS ? `${text.slice(0, MAX_ENTRY_CHARS)}… (${text.length - MAX_ENTRY_CHARS} more characters)` : text)
    const textOf = (blocks: ReadonlyArray<{ type: string; text?: string }>) => blocks.map((block) => (block.type === 'text' ? (block.text ?? '') : '')).join('')
    const entries: Array<Record<string, unknown>> = []
    const startedBy = new Map<string, { id: string; provider: string }>()
    for (const child of this.childrenByParent().get(id) ?? []) {
      if (child.header.toolCallId !== undefined) startedBy.set(child.header.toolCallId, { id: child.header.id, provider: child.header.provider ?? 'child' })
    }
    for (const event of session.events) {
      switch (event.type) {
        case 'user/message':
          entries.push({ kind: 'user', seq: event.seq, ts: event.ts, text: cut(textOf(event.message.content as never)) })
          break
        case 'assistant/message':
          entries.push({ kind: 'assistant', seq: event.seq, ts: event.ts, text: cut(textOf(event.message.content as never)), ...(event.usage && { usage: { inputTokens: event.usage.inputTokens, outputTokens: event.usage.outputTokens } }) })
          break
        case 'tool/call':
          entries.push({ kind: 'tool-call', seq: event.seq, ts: event.ts, callId: event.call.id, name: event.call.name, args: cut(JSON.stringify(event.call.args ?? event.call.rawArgs ?? {})) })
          break
        case 'tool/result': {
          const delegation = delegationOf(event.record)
          entries.push({
            kind: 'tool-result',
            seq: event.seq,
            ts: event.ts,
            callId: event.result.callId,
            name: event.result.name,
            error: event.result.isError === true,
            text: cut(textOf(event.result.content as never)),
            ...(event.permission && { permission: event.permission }),
            ...(delegation && { child: delegation.childId, childProvider: delegation.provider, ...(delegation.storedAt !== undefined && { childStoredAt: delegation.storedAt }) }),
            // A background delegation's child, known by the call that started it.
            ...(!delegation && startedBy.has(event.result.callId) && { child: startedBy.get(event.result.callId)!.id, childProvider: startedBy.get(event.result.callId)!.provider }),
          })
          break
        }
        case 'turn/end':
          entries.push({ kind: 'turn-end', seq: event.seq, ts: event.ts, reason: event.reason, ...(event.error !== undefined && { error: cut(event.error) }) })
          break
        case 'approval':
          // A remote child that keeps no session here: what it asked and who decided, recorded in its parent's session.
          entries.push({ kind: 'approval', seq: event.seq, ts: event.ts, path: event.request.path.map(cut), tool: event.request.tool, subject: cut(event.request.subject), ...(event.request.child !== undefined && { child: event.request.child }), permission: event.permission })
          break
        case 'hook/run':
          // A hook command's run (@dsh/hooks): which event, the command, how it ended and what it decided.
          entries.push({
            kind: 'hook',
            seq: event.seq,
            ts: event.ts,
            event: cut(event.event),
            command: cut(event.command),
            durationMs: event.durationMs,
            ...(event.exitCode !== undefined && { exitCode: event.exitCode }),
            ...(event.decision !== undefined && { decision: event.decision }),
            ...(event.callId !== undefined && { callId: event.callId }),
            ...(event.note !== undefined && { note: cut(event.note) }),
          })
          break
        default:
          break
      }
    }
    return { header: session.header, entries, ...(session.truncated !== undefined && { truncated: truncationNote(session.truncated) }) }
  }
}

/** The first line of a session's first prompt, cut for one line of the list of runs. */
function firstPromptLine(events: readonly SessionEvent[]): string | undefined {
  const first = events.find((event) => event.type === 'user/message')
  if (first?.type !== 'user/message') return undefined
  const content = first.message.content as ReadonlyArray<{ type: string; text?: string }> | string
  const text = typeof content === 'string' ? content : content.map((block) => (block.type === 'text' ? (block.text ?? '') : '')).join('')
  const line = text.trim().split('\n', 1)[0]!.trim()
  return line ? truncateColumns(line, PROMPT_COLUMNS) : undefined
}

/** What the page says of a session read only in part. */
function truncationNote({ readBytes, sizeBytes }: { readBytes: number; sizeBytes: number }): string {
  return `truncated: only the first ${megabytes(readBytes)} of ${megabytes(sizeBytes)} were read (dsh ui's memory bound); what came later is not shown`
}

function sumTree(node: NodeView): { inputTokens: number; outputTokens: number } {
  return node.children.reduce(
    (sum, child) => {
      const below = sumTree(child)
      return { inputTokens: sum.inputTokens + below.inputTokens, outputTokens: sum.outputTokens + below.outputTokens }
    },
    { inputTokens: node.inputTokens, outputTokens: node.outputTokens },
  )
}

function markBudget(node: NodeView, diagnostic: string): void {
  if (node.state === 'completed') return
  node.diagnostic ??= budgetWords(diagnostic)
  node.state = STOPPED_BY_BUDGET
}

/** Whether `request` was asked by node `id`: the agent itself, or a remote child of it that has no node (or is this node). */
function askerIs(request: PendingApproval, id: string, children: readonly NodeView[]): boolean {
  if (request.child !== undefined) {
    if (request.child === id || request.child.endsWith(`:${id}`)) return true
    // The remote child has a node of its own: that one is marked, not its parent.
    return request.agentId === id && !children.some((child) => request.child === child.id || request.child!.endsWith(`:${child.id}`))
  }
  return request.agentId === id
}

/** Foreground delegations whose recorded result says a budget ended them: child id → diagnostic. */
function foregroundBudgetStops(events: readonly SessionEvent[]): Map<string, string> {
  const found = new Map<string, string>()
  for (const event of events) {
    if (event.type !== 'tool/result' || event.result.isError !== true) continue
    const delegation = delegationOf(event.record)
    if (!delegation) continue
    // `the subagent ended error: budget: …` (`@dsh/tool-subagent`'s rendering of a result that did not complete).
    const first = event.result.content.map((block) => (block.type === 'text' ? block.text : '')).join('').split('\n', 1)[0]!
    const budget = first.startsWith('the subagent ended ') ? budgetDiagnostic(first) : undefined
    if (budget !== undefined) found.set(delegation.childId, budget)
  }
  return found
}
