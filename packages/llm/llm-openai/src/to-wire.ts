import { assertNever } from '@dsh/base'
import type { AssistantMessage, LlmRequest, Message, ToolResultBlock, ToolSpec } from '@dsh/llm'
import { textOf, toolCallsOf } from '@dsh/llm'
import type {
  ChatCompletionAssistantMessageParam,
  ChatCompletionCreateParamsStreaming,
  ChatCompletionFunctionTool,
  ChatCompletionMessageParam,
  ChatCompletionToolMessageParam,
} from 'openai/resources/chat/completions'

export interface WireOptions {
  replayReasoning: boolean
}

/** DeepSeek (and other reasoning endpoints) read the model's own reasoning back from this field. */
type AssistantParam = ChatCompletionAssistantMessageParam & { reasoning_content?: string }

/** The one place a dsh request becomes a chat-completions body. */
export function toChatRequest(request: LlmRequest, options: WireOptions): ChatCompletionCreateParamsStreaming {
  return {
    model: request.model,
    messages: toWireMessages(request.system, request.messages.toArray(), options),
    // The OpenAI API rejects an empty `tools` array, so no tools means no field.
    ...(request.tools.length ? { tools: request.tools.map(toWireTool) } : {}),
    stream: true,
    stream_options: { include_usage: true },
  }
}

export function toWireMessages(system: string, messages: readonly Message[], options: WireOptions): ChatCompletionMessageParam[] {
  const wire: ChatCompletionMessageParam[] = system ? [{ role: 'system', content: system }] : []
  for (const message of messages) wire.push(...toWireMessage(message, options))
  return wire
}

function toWireMessage(message: Message, options: WireOptions): ChatCompletionMessageParam[] {
  switch (message.role) {
    case 'user': {
      // Tool results answer the previous assistant turn, so they go first, as the `tool`
      // messages the wire requires right after an assistant's `tool_calls`.
      const results = message.content.filter((block): block is ToolResultBlock => block.type === 'tool-result')
      const text = message.content.filter((block) => block.type === 'text')
      const wire: ChatCompletionMessageParam[] = results.map(toWireToolResult)
      if (text.length || !results.length) wire.push({ role: 'user', content: textOf(text) })
      return wire
    }
    case 'assistant':
      return [toWireAssistant(message, options)]
    case 'tool':
      return message.content.map(toWireToolResult)
    default:
      return assertNever(message, 'message')
  }
}

function toWireAssistant(message: AssistantMessage, options: WireOptions): AssistantParam {
  const calls = toolCallsOf(message)
  const text = textOf(message.content)
  if (!calls.length) return { role: 'assistant', content: text }
  const reasoning = message.content.flatMap((block) => (block.type === 'reasoning' ? [block.text] : [])).join('')
  return {
    role: 'assistant',
    content: text || null,
    tool_calls: calls.map((call) => ({
      id: call.id,
      type: 'function',
      // Text the model produced that was not JSON goes back exactly as it came.
      function: { name: call.name, arguments: call.rawArgs ?? JSON.stringify(call.args ?? {}) },
    })),
    // Reasoning is otherwise dropped: DeepSeek ignores it between user turns, but in
    // thinking mode it answers 400 when a tool-call turn comes back without it.
    ...(options.replayReasoning && reasoning ? { reasoning_content: reasoning } : {}),
  }
}

/** The wire has no error flag on tool results, so a failure is said in the text. */
function toWireToolResult(block: ToolResultBlock): ChatCompletionToolMessageParam {
  const text = textOf(block.content)
  const content = block.isError && !/^error\b/i.test(text) ? `Error: ${text}` : text
  return { role: 'tool', tool_call_id: block.callId, content }
}

function toWireTool(tool: ToolSpec): ChatCompletionFunctionTool {
  return { type: 'function', function: { name: tool.name, description: tool.description, parameters: tool.parameters } }
}
