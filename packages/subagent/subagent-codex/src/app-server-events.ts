/**
 * The boundary between the app-server's messages and the run: results and notifications
 * arrive as `unknown`, are checked here, and leave as one small vocabulary. Only the fields
 * the run reads are checked; everything else in a message is ignored, so a newer server
 * that adds fields keeps working.
 */
import { assertNever, isRecord } from '@dsh/base'
import { ProtocolError } from './connection.js'
import type { ThreadItem, TurnPlanUpdatedNotification, TurnStatus } from './protocol/index.js'
import { readToolItem, readTokenUsage, type ToolItem, type TokenCounts } from './progress-items.js'

export type AppServerEvent =
  | { type: 'agent-message-delta'; threadId: string; turnId: string; delta: string }
  | { type: 'agent-message'; threadId: string; turnId: string; text: string }
  /** A tool call (command, file change, MCP or dynamic tool, web search, …) began or ended: progress only. */
  | { type: 'tool-item'; phase: 'started' | 'completed'; threadId: string; turnId: string; tool: ToolItem }
  /**
   * The thread's token usage: `last` is the latest model call's, `total` the thread's so far.
   * `turnId` is absent for a thread-level update (the protocol allows it): it belongs to
   * whatever turn of the thread is running.
   */
  | { type: 'token-usage'; threadId: string; turnId: string | undefined; last: TokenCounts; total: TokenCounts }
  | { type: 'plan'; threadId: string; turnId: string; steps: TurnPlanUpdatedNotification['plan'] }
  /** A progress notification that did not fit (an item without a type, of an unknown type, …): logged, never fatal. */
  | { type: 'dropped'; threadId: string; turnId: string; reason: string }
  | { type: 'error'; threadId: string; turnId: string; message: string; info: string | undefined; details: string | undefined; willRetry: boolean }
  | { type: 'turn-completed'; threadId: string; turnId: string; status: TurnStatus; error: { message: string; info: string | undefined } | undefined }

type AgentMessageItem = Extract<ThreadItem, { type: 'agentMessage' }>

/** Every turn status of the generated protocol; `satisfies` fails the build when Codex adds one. */
const TURN_STATUSES = { completed: true, interrupted: true, failed: true, inProgress: true } satisfies Record<TurnStatus, true>

/** The events the run acts on, from one notification; `undefined` for the many it does not need. */
export function readNotification(method: string, params: unknown): AppServerEvent | undefined {
  switch (method) {
    case 'item/agentMessage/delta': {
      const p = object(params, method)
      return { type: 'agent-message-delta', threadId: string(p, 'threadId', method), turnId: string(p, 'turnId', method), delta: string(p, 'delta', method) }
    }
    case 'item/started':
    case 'item/completed': {
      const p = object(params, method)
      const phase = method === 'item/started' ? 'started' : 'completed'
      // The answer's text is the run's output: a malformed one breaks the protocol.
      if (phase === 'completed' && isRecord(p.item) && p.item.type === ('agentMessage' satisfies AgentMessageItem['type'])) {
        return { type: 'agent-message', threadId: string(p, 'threadId', method), turnId: string(p, 'turnId', method), text: string(p.item, 'text', `${method} agentMessage`) }
      }
      // Anything else is progress only: without the ids it names nobody's turn, and is dropped.
      const { threadId, turnId } = p
      if (typeof threadId !== 'string' || typeof turnId !== 'string') return droppedUnnamed(method)
      // Anything else is progress: what does not fit is dropped, the run goes on.
      const reading = readToolItem(p.item)
      switch (reading.kind) {
        case 'tool':
          return { type: 'tool-item', phase, threadId, turnId, tool: reading.tool }
        case 'not-a-tool':
          return undefined
        case 'malformed':
          return { type: 'dropped', threadId, turnId, reason: `${method}: ${reading.reason}` }
        default:
          return assertNever(reading, 'item reading')
      }
    }
    case 'thread/tokenUsage/updated': {
      const p = object(params, method)
      const { threadId } = p
      const turnId = typeof p.turnId === 'string' ? p.turnId : undefined
      if (typeof threadId !== 'string') return droppedUnnamed(method)
      const usage = readTokenUsage(p.tokenUsage)
      if (typeof usage === 'string') return { type: 'dropped', threadId, turnId: turnId ?? '', reason: `${method}: ${usage}` }
      return { type: 'token-usage', threadId, turnId, ...usage }
    }
    case 'turn/plan/updated': {
      const p = object(params, method)
      const { threadId, turnId } = p
      if (typeof threadId !== 'string' || typeof turnId !== 'string') return droppedUnnamed(method)
      const steps = p.plan
      if (!Array.isArray(steps) || !steps.every((step) => isRecord(step) && typeof step.step === 'string' && typeof step.status === 'string')) {
        return { type: 'dropped', threadId, turnId, reason: `${method}: a plan that is not a list of { step, status }` }
      }
      return { type: 'plan', threadId, turnId, steps: steps as TurnPlanUpdatedNotification['plan'] }
    }
    case 'error': {
      const p = object(params, method)
      const error = turnError(p.error, method)
      return {
        type: 'error',
        threadId: string(p, 'threadId', method),
        turnId: string(p, 'turnId', method),
        message: error?.message ?? 'unknown error',
        info: error?.info,
        // What went wrong underneath (`stream disconnected before completion: …`), beside the message (`Reconnecting... 2/5`).
        details: isRecord(p.error) && typeof p.error.additionalDetails === 'string' && p.error.additionalDetails !== '' ? p.error.additionalDetails : undefined,
        willRetry: p.willRetry === true,
      }
    }
    case 'turn/completed': {
      const p = object(params, method)
      const turn = object(p.turn, `${method} turn`)
      const status = turn.status
      if (typeof status !== 'string' || !Object.hasOwn(TURN_STATUSES, status)) {
        throw new ProtocolError(`the codex app-server sent ${method} with an unknown turn status ${JSON.stringify(status)}`)
      }
      return { type: 'turn-completed', threadId: string(p, 'threadId', method), turnId: string(turn, 'id', `${method} turn`), status: status as TurnStatus, error: turnError(turn.error, method) }
    }
    default:
      return undefined
  }
}

/** A progress-only notification that does not say whose turn it is: logged and dropped. */
function droppedUnnamed(method: string): AppServerEvent {
  return { type: 'dropped', threadId: '', turnId: '', reason: `${method} without a string threadId and turnId` }
}

/** `thread/start`'s result: the new thread's id. */
export function readThreadId(result: unknown): string {
  return string(object(object(result, 'thread/start result').thread, 'thread/start thread'), 'id', 'thread/start thread')
}

/** `turn/start`'s result: the new turn's id. */
export function readTurnId(result: unknown): string {
  return string(object(object(result, 'turn/start result').turn, 'turn/start turn'), 'id', 'turn/start turn')
}

/** A `TurnError` (`{ message, codexErrorInfo }`), reduced to text; `undefined` for `null`. */
function turnError(value: unknown, where: string): { message: string; info: string | undefined } | undefined {
  if (value === null || value === undefined) return undefined
  const error = object(value, `${where} error`)
  const info = error.codexErrorInfo
  return {
    message: string(error, 'message', `${where} error`),
    // `codexErrorInfo` is a name (`internalServerError`) or a one-key object (`{ httpConnectionFailed: {…} }`).
    info: typeof info === 'string' ? info : isRecord(info) ? Object.keys(info)[0] : undefined,
  }
}

function object(value: unknown, where: string): Record<string, unknown> {
  if (!isRecord(value)) throw new ProtocolError(`the codex app-server sent ${where} that is not an object`)
  return value
}

function string(record: Record<string, unknown>, key: string, where: string): string {
  const value = record[key]
  if (typeof value !== 'string') throw new ProtocolError(`the codex app-server sent ${where} without a string \`${key}\``)
  return value
}
