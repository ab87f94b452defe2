/**
 * Progress and usage of an in-process child (spawn, fork, a local continuable child), read
 * from the child's own session: its live text chunks, its tool calls and results, and the
 * usage on its assistant messages. One implementation for every in-process provider, so
 * none of them has to report anything.
 */
import type { Usage } from '@dsh/llm'
import { textOf } from '@dsh/llm'
import type { Session, SessionEvent, SessionUpdate } from '@dsh/session'
import type { ProgressSink, SubagentUsage } from '../types.js'
import { summariseArgs } from './shape.js'

/** An empty usage to add to. */
export function noUsage(): SubagentUsage {
  return { inputTokens: 0, outputTokens: 0, cachedInputTokens: 0 }
}

/** `total` plus one model call's usage (`total` is changed and returned). */
export function addUsage(total: SubagentUsage, usage: Usage): SubagentUsage {
  total.inputTokens += usage.inputTokens
  total.outputTokens += usage.outputTokens
  total.cachedInputTokens += usage.cacheHitInputTokens ?? 0
  return total
}

/**
 * Where the session's latest turn begins: the seq after its `turn/start` (or the first own
 * event). Walks back from the end, so its cost is the turn's length, not the session's.
 */
function latestTurnFrom(session: Session): number {
  let from = session.length
  while (from > session.seedLength && session.at(from - 1)?.type !== 'turn/start') from--
  return from
}

/**
 * The usage of the session's latest turn (a one-shot child has only one), or `undefined`
 * when no model call in it reported usage.
 */
export function latestTurnUsage(session: Session): SubagentUsage | undefined {
  let total: SubagentUsage | undefined
  for (let seq = latestTurnFrom(session); seq < session.length; seq++) {
    const event = session.at(seq)
    if (event?.type === 'assistant/message' && event.usage) total = addUsage(total ?? noUsage(), event.usage)
  }
  return total
}

export interface FollowOptions {
  /** Start with what the latest turn already did (default); false for a served session followed before its next turn, whose latest is an earlier one. */
  replay?: boolean
  /** How a tool call's arguments and a failed call's result are shown (default `summariseArgs`: one display line); a wire with its own bound passes its own. */
  shape?: (value: unknown) => string
}

/**
 * Report the child's progress to `sink` from now on, starting with what its latest turn
 * already did (the child may have begun before its run was published; see `FollowOptions`).
 * Returns the unsubscriber.
 */
export function followLocalChild(session: Session, sink: ProgressSink, options: FollowOptions = {}): () => void {
  const { replay = true, shape = summariseArgs } = options
  const usage = noUsage()
  // Whether the assistant message being produced streamed its text as chunks: a message
  // whose text never streamed (an adapter without deltas) is reported whole when it lands.
  let streamed = false
  const onEvent = (event: SessionEvent): void => {
    switch (event.type) {
      case 'assistant/message': {
        if (!streamed) {
          const text = textOf(event.message.content)
          if (text) sink.report({ kind: 'text', text })
        }
        streamed = false
        if (event.usage) {
          addUsage(usage, event.usage)
          sink.report({ kind: 'usage', usage: { ...usage } })
        }
        return
      }
      case 'tool/call': {
        const { call } = event
        sink.report({ kind: 'tool-start', callId: call.id, name: call.name, args: shape(call.args ?? call.rawArgs ?? {}) })
        return
      }
      case 'tool/result': {
        const { result } = event
        const update = { kind: 'tool-end' as const, callId: result.callId, name: result.name, ok: result.isError !== true }
        sink.report(result.isError ? { ...update, detail: shape(textOf(result.content)) } : update)
        return
      }
      default:
        return
    }
  }
  // What the latest turn did before anyone was listening.
  for (let seq = replay ? latestTurnFrom(session) : session.length; seq < session.length; seq++) {
    const event = session.at(seq)
    if (event) onEvent(event)
  }
  const listener = (update: SessionUpdate): void => {
    if (update.type === 'assistant/chunk') {
      if (update.kind !== 'text' || !update.text) return
      streamed = true
      sink.report({ kind: 'text', text: update.text })
      return
    }
    onEvent(update)
  }
  return session.subscribe(listener)
}
