/**
 * Children that never started, as a parent's session records them. A delegation refused
 * before its child's first step (a budget already spent, the tree's queue full, the depth
 * bound, a cancel while it waited) leaves no session: only the parent's tool result says
 * so, in the words `@dsh/tool-subagent` gives the model (`the subagent could not be
 * started: …`, `the helper "NAME" could not be started: …`, `the subagent was not
 * started: …`), or, for a background child, the task's status the parent read
 * (`background.ts`). These are read here, once, for `dsh ui` and `dsh sessions tree`;
 * `tests/unstarted.test.ts` runs the real tools, so a change of wording fails there.
 *
 * Only `@dsh/base` and types are imported: `dsh sessions` loads this module (through
 * `@dsh/ui-server/delegations`) without the server.
 */
import { isRecord } from '@dsh/base'
import type { SessionEvent } from '@dsh/session'
import { backgroundDelegations, type BackgroundDelegation } from './background.js'

/** A delegation whose child never took a step. */
export interface UnstartedChild {
  /** The parent's tool call that asked for it. */
  callId: string
  /** The delegation tool's name (`subagent`, `subagent_fork`, …). */
  tool: string
  /** Its background task id, when it was delegated in the background. */
  taskId?: string
  /** The call's description. */
  label?: string
  /** The helper (agent definition) it was to run as. */
  helper?: string
  /** `queued`: waiting for a slot of its tree's cap while its parent runs; else it will not start. */
  state: 'not-started' | 'queued'
  /** Why it did not start (a budget's `budget: …`, the queue's cap, a cancel), when the parent heard. */
  reason?: string
  /** When the parent recorded it. */
  at: number
  /** When the parent heard that it would not start. */
  endedAt?: number
}

/** Where a parent asked for a child: its delegation call's time and place among the parent's calls. */
export interface AskedAt {
  at: number
  index: number
}

/**
 * When and in what order a parent made each tool call, by call id: every call with that
 * id, in order (an id can come back in a later reply: a provider that sends none gets
 * `call_0`, `call_1`, … per reply). Children are listed in the order their parent asked
 * for them, not by when each started or was refused: the calls of one reply run together,
 * so the times their results were recorded race (a foreground refusal can be recorded
 * after a later call's background start).
 */
export function askedOrder(events: readonly SessionEvent[]): Map<string, AskedAt[]> {
  const asked = new Map<string, AskedAt[]>()
  let index = 0
  for (const event of events) {
    if (event.type !== 'tool/call') continue
    const where = { at: event.ts, index: index++ }
    const same = asked.get(event.call.id)
    if (same) same.push(where)
    else asked.set(event.call.id, [where])
  }
  return asked
}

/**
 * Orders children by when their parent asked (`call`'s place in `asked`: of calls sharing
 * its id, the last one made by the child's own time `at`), and a child no call of this
 * parent asked for by `at`. The key is one pair (time, place among the calls; none sorts
 * after the calls of the same moment, an unknown time after every known one), so the
 * order is total.
 */
export function byAsking(asked: ReadonlyMap<string, readonly AskedAt[]>): (a: { call?: string; at: number }, b: { call?: string; at: number }) => number {
  const key = (child: { call?: string; at: number }): [number, number] => {
    const at = Number.isFinite(child.at) ? child.at : Number.POSITIVE_INFINITY
    const calls = child.call === undefined ? undefined : asked.get(child.call)
    if (!calls) return [at, Number.POSITIVE_INFINITY]
    const where = calls.findLast((call) => call.at <= at) ?? calls[0]!
    return [where.at, where.index]
  }
  return (a, b) => {
    const [atA, indexA] = key(a)
    const [atB, indexB] = key(b)
    return atA !== atB ? (atA < atB ? -1 : 1) : indexA === indexB ? 0 : indexA < indexB ? -1 : 1
  }
}

/** What a refused start says, in `@dsh/tool-subagent`'s words: the helper it named and why. */
const REFUSED = /^(?:the subagent could not be started|the helper "([^"\n]*)" could not be started|the subagent was not started): ([^\n]*)/

/** A background task's status that says its child never started (`background.ts`'s `settled`). */
const NEVER_STARTED_STATUS = /^(?:failed: the subagent could not be started: (.*)|killed: (the subagent was stopped before it started.*))$/s

/** Delegations refused before their child started: foreground calls and background ones refused at once. */
export function refusedDelegations(events: readonly SessionEvent[]): UnstartedChild[] {
  const calls = new Map<string, { name: string; args: Record<string, unknown> }>()
  const found: UnstartedChild[] = []
  for (const event of events) {
    if (event.type === 'tool/call') {
      calls.set(event.call.id, { name: event.call.name, args: isRecord(event.call.args) ? event.call.args : {} })
      continue
    }
    if (event.type !== 'tool/result' || event.result.isError !== true || isRecord(event.record?.delegation)) continue
    const refused = REFUSED.exec(textOf(event.result.content))
    if (!refused) continue
    const call = calls.get(event.result.callId)
    const description = call?.args.description
    const helper = refused[1] ?? (typeof call?.args.agent === 'string' ? call.args.agent : undefined)
    found.push({
      callId: event.result.callId,
      tool: event.result.name,
      ...(typeof description === 'string' && { label: description }),
      ...(helper !== undefined && { helper }),
      state: 'not-started',
      reason: refused[2]!,
      at: event.ts,
      endedAt: event.ts,
    })
  }
  return found
}

/** Why a background delegation never started, when its status says so. */
export function neverStartedReason(delegation: Pick<BackgroundDelegation, 'settled'>): string | undefined {
  const match = delegation.settled === undefined ? null : NEVER_STARTED_STATUS.exec(delegation.settled)
  return match ? (match[1] ?? match[2]) : undefined
}

/**
 * Every child of a parent that never started: refused delegations, and background ones
 * with no child session (`started`: the call ids that have one) whose status says it never
 * started, or that were still queued when the parent's session ended (`parentRunning`
 * false) or are queued now (`parentRunning` true).
 */
export function unstartedChildren(events: readonly SessionEvent[], started: ReadonlySet<string>, parentRunning: boolean): UnstartedChild[] {
  const found = refusedDelegations(events)
  const tools = new Map<string, string>()
  for (const event of events) if (event.type === 'tool/call') tools.set(event.call.id, event.call.name)
  for (const delegation of backgroundDelegations(events)) {
    if (started.has(delegation.callId)) continue
    const base = { callId: delegation.callId, tool: tools.get(delegation.callId) ?? 'subagent', taskId: delegation.taskId, ...(delegation.label !== undefined && { label: delegation.label }), at: delegation.at }
    const reason = neverStartedReason(delegation)
    if (reason !== undefined) found.push({ ...base, state: 'not-started', reason, endedAt: delegation.settledAt ?? delegation.at })
    else if (delegation.settled === undefined && delegation.queued) {
      found.push(parentRunning ? { ...base, state: 'queued' } : { ...base, state: 'not-started', reason: "still queued when its parent's session ended", endedAt: delegation.at })
    }
  }
  const order = byAsking(askedOrder(events))
  return found.sort((a, b) => order({ call: a.callId, at: a.at }, { call: b.callId, at: b.at }))
}

function textOf(blocks: ReadonlyArray<{ type: string; text?: string }> | string): string {
  if (typeof blocks === 'string') return blocks
  return blocks.map((block) => (block.type === 'text' ? (block.text ?? '') : '')).join('')
}
