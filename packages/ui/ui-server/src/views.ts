/**
 * The JSON the page renders, built from the session index: the list of runs, one run's
 * tree (with a timeline: each session's start and end), and one session's transcript.
 * Text is passed as data, never as markup: the page puts it in the document with
 * `textContent` only, so hostile prompts and tool output are shown, not executed.
 */
import { isRecord } from '@dsh/base'
import type { SessionEvent, SessionHeader } from '@dsh/session'
import type { IndexedSession, SessionIndex } from './index-of-sessions.js'

/** Longest text of one transcript entry sent to the page. */
export const MAX_ENTRY_CHARS = 20_000

export interface NodeView {
  id: string
  parent?: string
  label?: string
  provider?: string
  helper?: string
  origin?: string
  depth: number
  state: string
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
  state: string
  startedAt: number
  endedAt?: number
  children: number
  inputTokens: number
  outputTokens: number
}

function lastTurnState(events: readonly SessionEvent[]): string {
  let open = false
  let reason = 'idle'
  for (const event of events) {
    if (event.type === 'turn/start') open = true
    if (event.type === 'turn/end') {
      open = false
      reason = event.reason
    }
  }
  return open ? 'running' : reason
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

function delegationOf(record: Readonly<Record<string, unknown>> | undefined): { childId: string; provider: string; local: boolean; storedAt?: string } | undefined {
  const delegation = record?.delegation
  if (!isRecord(delegation) || typeof delegation.childId !== 'string' || typeof delegation.provider !== 'string') return undefined
  return { childId: delegation.childId, provider: delegation.provider, local: delegation.local === true, ...(typeof delegation.storedAt === 'string' && { storedAt: delegation.storedAt }) }
}

export class Views {
  constructor(private readonly index: SessionIndex) {}

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
    const count = (id: string): number => (byParent.get(id) ?? []).reduce((sum, child) => sum + 1 + count(child.header.id), 0)
    return roots
      .map((session) => {
        const tree = this.node(session, byParent, 0)
        const total = sumTree(tree)
        return { id: session.header.id, label: session.header.label, state: tree.state, startedAt: tree.startedAt, endedAt: tree.endedAt, children: count(session.header.id), ...total }
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
    const state = lastTurnState(events)
    const local = (byParent.get(header.id) ?? []).filter((child) => !seen.has(child.header.id))
    const children = local.map((child) => this.node(child, byParent, depth + 1, seen))
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
      children.push({ id: delegation.childId, parent: header.id, provider: delegation.provider, depth: depth + 1, state: event.result.isError ? 'error' : 'completed', startedAt: event.ts, endedAt: event.ts, inputTokens: 0, outputTokens: 0, storedAt: delegation.storedAt ?? 'elsewhere', children: [] })
    }
    children.sort((a, b) => a.startedAt - b.startedAt)
    return {
      id: header.id,
      ...(header.parentSession !== undefined && { parent: header.parentSession }),
      ...(header.label !== undefined && { label: header.label }),
      ...(header.provider !== undefined && { provider: header.provider }),
      ...(helperOf(header) !== undefined && { helper: helperOf(header) }),
      ...(header.origin !== undefined && { origin: header.origin }),
      depth,
      state,
      ...times(session, state),
      ...usageOf(events),
      children,
    }
  }

  /** One session's transcript as entries the page lists in order. */
  transcript(id: string): { header: SessionHeader; entries: Array<Record<string, unknown>> } | undefined {
    const session = this.index.get(id)
    if (!session) return undefined
    const cut = (text: string) => (text.length > MAX_ENTRY_CHARS ? `${text.slice(0, MAX_ENTRY_CHARS)}… (${text.length - MAX_ENTRY_CHARS} more characters)` : text)
    const textOf = (blocks: ReadonlyArray<{ type: string; text?: string }>) => blocks.map((block) => (block.type === 'text' ? (block.text ?? '') : '')).join('')
    const entries: Array<Record<string, unknown>> = []
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
          })
          break
        }
        case 'turn/end':
          entries.push({ kind: 'turn-end', seq: event.seq, ts: event.ts, reason: event.reason, ...(event.error !== undefined && { error: cut(event.error) }) })
          break
        default:
          break
      }
    }
    return { header: session.header, entries }
  }
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
