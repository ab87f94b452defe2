/**
 * The boundary between the app-server's messages and the run: results and notifications
 * arrive as `unknown`, are checked here, and leave as one small vocabulary. Only the fields
 * the run reads are checked; everything else in a message is ignored, so a newer server
 * that adds fields keeps working.
 */
import { isRecord } from '@dsh/base'
import { ProtocolError } from './connection.js'
import type { ThreadItem, TurnStatus } from './protocol/index.js'

export type AppServerEvent =
  | { type: 'agent-message-delta'; threadId: string; turnId: string; delta: string }
  | { type: 'agent-message'; threadId: string; turnId: string; text: string }
  | { type: 'error'; threadId: string; turnId: string; message: string; info: string | undefined; willRetry: boolean }
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
    case 'item/completed': {
      const p = object(params, method)
      const item = object(p.item, `${method} item`)
      if (item.type !== ('agentMessage' satisfies AgentMessageItem['type'])) return undefined
      return { type: 'agent-message', threadId: string(p, 'threadId', method), turnId: string(p, 'turnId', method), text: string(item, 'text', `${method} agentMessage`) }
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
