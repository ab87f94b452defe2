import { assertNever } from '@dsh/base'
import type { SessionUpdate as AcpSessionUpdate } from '@agentclientprotocol/sdk'
import type { SessionEvent } from '@dsh/session'
import { acpUpdateOf } from './updates.js'

/**
 * What `session/load` replays of one stored event. ACP asks the agent to stream the whole
 * conversation back as the `session/update`s a client would have seen live: the user's
 * words as `user_message_chunk`, the agent's text and reasoning as message and thought
 * chunks (one per block, since the live chunks were never stored), and each tool call
 * with its result exactly as a live turn announces them. Tool calls inside an
 * `assistant/message` are skipped: their `tool/call` events replay them.
 */
export function acpReplayOf(event: SessionEvent): AcpSessionUpdate[] {
  switch (event.type) {
    case 'user/message':
      // Tool results ride in their own `tool/result` events; only the words are the user's.
      return event.message.content.flatMap((block) => (block.type === 'text' ? [{ sessionUpdate: 'user_message_chunk' as const, content: { type: 'text' as const, text: block.text } }] : []))
    case 'assistant/message':
      return event.message.content.flatMap((block): AcpSessionUpdate[] => {
        switch (block.type) {
          case 'text':
            return [{ sessionUpdate: 'agent_message_chunk', content: { type: 'text', text: block.text } }]
          case 'reasoning':
            return [{ sessionUpdate: 'agent_thought_chunk', content: { type: 'text', text: block.text } }]
          case 'tool-call':
            return []
          default:
            return assertNever(block, 'assistant content block')
        }
      })
    case 'tool/call':
    case 'tool/result': {
      const update = acpUpdateOf(event)
      return update ? [update] : []
    }
    case 'turn/start':
    case 'step/start':
    case 'step/end':
    case 'turn/end':
    case 'input/queued':
    case 'input/taken':
    case 'approval':
    case 'hook/run':
      return []
    default:
      return assertNever(event, 'session event')
  }
}
