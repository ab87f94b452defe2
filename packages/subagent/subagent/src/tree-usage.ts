/**
 * Usage following for the tree gate (`tree-limits.ts`): how what a child uses reaches its
 * budgets. An in-process child's usage is read from its own session as each model call
 * lands (`followSession`); a remote child's arrives as the cumulative `usage` reports of
 * its progress (`countingSink`). Either way a cumulative figure is turned into what it adds
 * (`advance`), and a figure that goes backwards (a transport that restarted its count)
 * adds nothing and takes nothing back. Loaded with the gate, only when limits are in use.
 */
import type { Session, SessionEvent, SessionUpdate } from '@dsh/session'
import type { Usage } from '@dsh/llm'
import type { ProgressSink, SubagentProgress, SubagentUsage } from './types.js'

/** Token figures: the latest cumulative ones counted, or what one report added. */
export interface TokenCount {
  inputTokens: number
  outputTokens: number
}

/**
 * What cumulative `usage` adds to `counted` (the highest figures counted so far), which it
 * then holds; undefined when it adds nothing. Figures only grow: one smaller than the last
 * adds nothing and grants nothing back, and once the count resumes only what goes past the
 * highest figure counted is added again.
 */
export function advance(counted: TokenCount, usage: TokenCount): TokenCount | undefined {
  const input = Math.max(0, usage.inputTokens - counted.inputTokens)
  const output = Math.max(0, usage.outputTokens - counted.outputTokens)
  if (input === 0 && output === 0) return undefined
  counted.inputTokens += input
  counted.outputTokens += output
  return { inputTokens: input, outputTokens: output }
}

/**
 * A progress sink that hands each `usage` report to `onUsage` (a remote child's cumulative
 * figures) and passes every update on to `downstream`, when there is one.
 */
export function countingSink(downstream: ProgressSink | undefined, onUsage: (usage: SubagentUsage) => void): ProgressSink {
  return {
    report: (update: SubagentProgress) => {
      if (update.kind === 'usage') onUsage(update.usage)
      downstream?.report(update)
    },
  }
}

/**
 * Follow the model calls of `session` (an in-process child's, or a root's own): for each,
 * `onCall` gets the session's cumulative usage so far and that call's own usage. Calls
 * already in the session are counted first (its own events: a fork's seed is its
 * parent's). Returns how to stop following.
 */
export function followSession(session: Session, onCall: (total: SubagentUsage, call: Usage) => void): () => void {
  const total: SubagentUsage = { inputTokens: 0, outputTokens: 0, cachedInputTokens: 0 }
  const onEvent = (event: SessionEvent | SessionUpdate) => {
    if (event.type !== 'assistant/message' || event.usage === undefined) return
    total.inputTokens += event.usage.inputTokens
    total.outputTokens += event.usage.outputTokens
    onCall(total, event.usage)
  }
  for (let seq = session.seedLength; seq < session.length; seq++) {
    const event = session.at(seq)
    if (event !== undefined) onEvent(event)
  }
  return session.subscribe(onEvent)
}
