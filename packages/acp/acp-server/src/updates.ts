import { acpStopReasonOfStop, assertNever } from '@dsh/base'
import type { SessionUpdate as AcpSessionUpdate, StopReason as AcpStopReason } from '@agentclientprotocol/sdk'
import { RequestError } from '@agentclientprotocol/sdk'
import { textOf } from '@dsh/llm'
import type { TurnResult } from '@dsh/agent'
import type { SessionUpdate } from '@dsh/session'

/**
 * What an ACP client hears of a dsh session update. Text and reasoning stream as
 * message and thought chunks (every bit of assistant text is published as a chunk, so
 * the durable `assistant/message` adds nothing); each tool call is announced when the
 * model makes it and updated with its result. Turn and step bookkeeping has no ACP
 * counterpart: the prompt's response ends the turn.
 */
export function acpUpdateOf(update: SessionUpdate): AcpSessionUpdate | undefined {
  switch (update.type) {
    case 'assistant/chunk':
      return {
        sessionUpdate: update.kind === 'text' ? 'agent_message_chunk' : 'agent_thought_chunk',
        content: { type: 'text', text: update.text },
      }
    case 'tool/call':
      return {
        sessionUpdate: 'tool_call',
        toolCallId: update.call.id,
        title: update.call.name,
        kind: 'other',
        status: 'in_progress',
        rawInput: update.call.args ?? update.call.rawArgs,
      }
    case 'tool/result':
      return {
        sessionUpdate: 'tool_call_update',
        toolCallId: update.result.callId,
        status: update.result.isError ? 'failed' : 'completed',
        content: [{ type: 'content', content: { type: 'text', text: textOf(update.result.content) } }],
      }
    case 'turn/start':
    case 'step/start':
    case 'user/message':
    case 'assistant/message':
    case 'step/end':
    case 'turn/end':
    case 'input/queued':
    case 'input/taken':
    case 'approval':
    case 'hook/run':
      return undefined
    default:
      // A listener's throw is contained by the session (logged); this line never runs for a well-typed update.
      return assertNever(update, 'session update')
  }
}

/**
 * How a dsh turn answers `session/prompt`. A turn the client cancelled answers
 * `cancelled` whatever it managed to do (ACP requires it); a failed turn has no stop
 * reason in ACP, so it answers with a JSON-RPC error carrying the turn's error.
 */
export function acpStopReasonOf(ended: TurnResult, cancelRequested: boolean): AcpStopReason {
  const answer = acpStopReasonOfStop(ended.reason, cancelRequested)
  if (answer === 'error') throw new RequestError(-32603, `the turn ended with an error: ${ended.error ?? 'no detail'}`, { turn: ended.turn, reason: ended.reason })
  return answer
}
