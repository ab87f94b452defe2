import { assertNever } from '@dsh/base'
import type { AssistantMessage, LlmRequest, Message, ToolResultBlock, ToolSpec } from '@dsh/llm'
import { textOf } from '@dsh/llm'
import type {
  CacheControlEphemeral,
  ContentBlockParam,
  MessageCreateParamsStreaming,
  MessageParam,
  TextBlockParam,
  Tool,
  ToolResultBlockParam,
} from '@anthropic-ai/sdk/resources/messages'

export interface WireOptions {
  maxTokens: number
  /** Mark cache breakpoints (see `markBreakpoints`). */
  promptCaching: boolean
}

const EPHEMERAL: CacheControlEphemeral = { type: 'ephemeral' }

/** The one place a dsh request becomes a Messages body. */
export function toMessagesRequest(request: LlmRequest, options: WireOptions): MessageCreateParamsStreaming {
  const system: TextBlockParam[] = request.system ? [{ type: 'text', text: request.system }] : []
  const tools = request.tools.map(toWireTool)
  const messages = request.messages.toArray().flatMap(toWireMessage)
  if (options.promptCaching) markBreakpoints(tools, system, messages)
  return {
    model: request.model,
    max_tokens: options.maxTokens,
    ...(system.length > 0 && { system }),
    ...(tools.length > 0 && { tools }),
    messages,
    stream: true,
  }
}

/**
 * Cache breakpoints, three of the four the API allows. A breakpoint caches the prompt up to
 * and including its block, in the API's order (tools, then system, then messages), and a
 * later request is served from the cache when its prompt up to a breakpoint is the same,
 * byte for byte:
 *
 * 1. the last block of the system prompt (the last tool when there is no system prompt):
 *    tools and instructions, shared by every request of the agent and of its fork children;
 * 2. the last message: this request's whole prompt, which the next request repeats (each
 *    step appends the model's answer and the tool results, within the API's look-back);
 * 3. the message before it: the prompt of a request that is this one with one message
 *    appended — a fork child's first request is its parent's last with the child's prompt
 *    after it (`@dsh/subagent-fork`), so this breakpoint is the very block the parent's
 *    breakpoint 2 was on, and the child reads the parent's entry whole.
 */
function markBreakpoints(tools: Tool[], system: TextBlockParam[], messages: MessageParam[]): void {
  const head = system.at(-1) ?? tools.at(-1)
  if (head) head.cache_control = EPHEMERAL
  for (const message of messages.slice(-2)) {
    const blocks = message.content
    if (typeof blocks === 'string') continue
    const last = blocks.at(-1)
    if (last && isCacheable(last)) last.cache_control = EPHEMERAL
  }
}

/** The blocks this adapter writes, each of which can carry `cache_control`. */
function isCacheable(block: ContentBlockParam): block is TextBlockParam | ToolResultBlockParam | Extract<ContentBlockParam, { type: 'tool_use' }> {
  return block.type === 'text' || block.type === 'tool_result' || block.type === 'tool_use'
}

/**
 * One wire message per dsh message, never merged: appending a message then never changes
 * the ones before it, which the prompt cache needs (the API itself joins consecutive
 * messages of one role). A message with nothing to say is left out (the API refuses empty
 * and blank text blocks).
 */
function toWireMessage(message: Message): MessageParam[] {
  switch (message.role) {
    case 'user': {
      // Tool results answer the previous assistant turn, so they come first, as the API requires.
      const results = message.content.filter((block): block is ToolResultBlock => block.type === 'tool-result').map(toWireToolResult)
      const text = textOf(message.content.filter((block) => block.type === 'text'))
      const content: ContentBlockParam[] = [...results]
      if (text.trim()) content.push({ type: 'text', text })
      return content.length > 0 ? [{ role: 'user', content }] : []
    }
    case 'assistant':
      return toWireAssistant(message)
    case 'tool':
      return message.content.length > 0 ? [{ role: 'user', content: message.content.map(toWireToolResult) }] : []
    default:
      return assertNever(message, 'message')
  }
}

/**
 * Text and tool calls in their order. Reasoning is not sent back: dsh does not ask for
 * extended thinking, and thinking blocks are accepted back only with the signature the API
 * gave them.
 */
function toWireAssistant(message: AssistantMessage): MessageParam[] {
  const content: ContentBlockParam[] = []
  for (const block of message.content) {
    if (block.type === 'text' && block.text.trim()) content.push({ type: 'text', text: block.text })
    // A call whose input was not a JSON object went back to the model as a failed call; its input on the wire must be an object.
    if (block.type === 'tool-call') content.push({ type: 'tool_use', id: block.id, name: block.name, input: isObject(block.args) ? block.args : {} })
  }
  return content.length > 0 ? [{ role: 'assistant', content }] : []
}

function toWireToolResult(block: ToolResultBlock): ToolResultBlockParam {
  const text = textOf(block.content)
  return { type: 'tool_result', tool_use_id: block.callId, content: text ? [{ type: 'text', text }] : [], ...(block.isError && { is_error: true }) }
}

function toWireTool(tool: ToolSpec): Tool {
  return { name: tool.name, description: tool.description, input_schema: { type: 'object', ...tool.parameters } }
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}
