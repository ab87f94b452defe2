import type { ToolCallBlock } from '@dsh/llm'
import type { Session } from '@dsh/session'

/**
 * A session read back after its process stopped mid-turn (crash, SIGKILL, power loss)
 * ends in an open turn, often with tool calls that never got results. A model API
 * rejects such a history (every call needs its result), so before the session takes a
 * new turn the open one is closed in the log: each unanswered call gets an error result,
 * the open step and the turn end, and the turn says why. Appending keeps history intact.
 */
/** Why a turn closed by `closeInterruptedTurn` ended (its `turn/end` error and its calls' results). */
export const INTERRUPTED_TURN = 'interrupted: the process running this session stopped before the turn ended'

/**
 * The tool calls the last `closeInterruptedTurn` answered with an error, when the session's
 * last event is the end it appended (a resume just closed that turn): what a tool whose
 * calls survive their process (a queue job) may take up again.
 */
export function callsClosedByInterruption(session: Session): ToolCallBlock[] {
  const own = session.ownEvents()
  const last = own.at(-1)
  if (last?.type !== 'turn/end' || last.error !== INTERRUPTED_TURN) return []
  const calls = new Map<string, ToolCallBlock>()
  const closed: ToolCallBlock[] = []
  for (let i = own.length - 2; i >= 0; i--) {
    const event = own[i]
    if (event.type === 'turn/start') break
    if (event.type === 'tool/call') calls.set(event.call.id, event.call)
  }
  for (let i = own.length - 2; i >= 0; i--) {
    const event = own[i]
    if (event.type === 'turn/start') break
    if (event.type === 'tool/result' && event.result.isError && calls.has(event.result.callId) && event.result.content.some((block) => block.type === 'text' && block.text.endsWith(INTERRUPTED_TURN))) closed.unshift(calls.get(event.result.callId)!)
  }
  return closed
}

export function closeInterruptedTurn(session: Session): boolean {
  const own = session.ownEvents()
  let turnStart = -1
  for (let i = own.length - 1; i >= 0; i--) {
    const event = own[i]
    if (event.type === 'turn/end') return false
    if (event.type === 'turn/start') {
      turnStart = i
      break
    }
  }
  if (turnStart < 0) return false
  const turn = own[turnStart]
  const unanswered = new Map<string, ToolCallBlock>()
  let openStep: number | undefined
  for (const event of own.slice(turnStart)) {
    if (event.type === 'tool/call') unanswered.set(event.call.id, event.call)
    else if (event.type === 'tool/result') unanswered.delete(event.result.callId)
    else if (event.type === 'step/start') openStep = event.step
    else if (event.type === 'step/end') openStep = undefined
  }
  const why = INTERRUPTED_TURN
  for (const call of unanswered.values()) {
    session.append({ type: 'tool/result', result: { type: 'tool-result', callId: call.id, name: call.name, content: [{ type: 'text', text: `${call.name} never returned: ${why}` }], isError: true } })
  }
  if (openStep !== undefined) session.append({ type: 'step/end', step: openStep })
  session.append({ type: 'turn/end', turn: turn.type === 'turn/start' ? turn.turn : 0, reason: 'error', error: why })
  return true
}
