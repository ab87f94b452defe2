/**
 * What a parent hears of its children, for the progress tests of every provider: the
 * `subagent/start`, `subagent/progress` and `subagent/end` events in the order they came,
 * and the updates of one child read back from them.
 */
import type { Context } from 'cordis'
import type { SubagentProgress, SubagentProgressInfo, SubagentRunEndInfo, SubagentRunInfo } from '@dsh/subagent'

export type Heard = { kind: 'start'; info: SubagentRunInfo } | { kind: 'progress'; info: SubagentProgressInfo } | { kind: 'end'; info: SubagentRunEndInfo }

/** Every child event `ctx` emits from now on, in order. */
export function listenToChildren(ctx: Context): Heard[] {
  const heard: Heard[] = []
  ctx.on('subagent/start', (info) => void heard.push({ kind: 'start', info }))
  ctx.on('subagent/progress', (info) => void heard.push({ kind: 'progress', info }))
  ctx.on('subagent/end', (info) => void heard.push({ kind: 'end', info }))
  return heard
}

/** The updates of the child `id` (of every child when absent), as the events carried them. */
export const updatesAsSent = (heard: readonly Heard[], id?: string): SubagentProgress[] =>
  heard.flatMap((entry) => (entry.kind === 'progress' && (id === undefined || entry.info.id === id) ? entry.info.updates : []))

/**
 * The updates of the child `id` (of every child when absent) in order, with text that the
 * coalescing interval split across events joined again: where a delta falls relative to
 * a flush depends on the machine's speed.
 */
export const updatesOf = (heard: readonly Heard[], id?: string): SubagentProgress[] =>
  updatesAsSent(heard, id).reduce<SubagentProgress[]>((joined, update) => {
    const last = joined.at(-1)
    if (update.kind === 'text' && last?.kind === 'text') joined[joined.length - 1] = { kind: 'text', text: last.text + update.text }
    else joined.push(update)
    return joined
  }, [])

/** The streamed text of `updates`, joined. */
export const textOf = (updates: readonly SubagentProgress[]): string => updates.map((update) => (update.kind === 'text' ? update.text : '')).join('')

/** Where the `subagent/end` of the child `id` stands among what was heard (-1 before it came). */
export const endOf = (heard: readonly Heard[], id: string): number => heard.findIndex((entry) => entry.kind === 'end' && entry.info.id === id)
