/**
 * The message vocabulary every dsh layer speaks. Adapters translate it to and from a
 * vendor's wire format at their own boundary; nothing else knows a vendor's shapes.
 */

export interface TextBlock {
  type: 'text'
  text: string
}

/** Model reasoning ("thinking") text. Kept in the log; adapters decide whether to resend it. */
export interface ReasoningBlock {
  type: 'reasoning'
  text: string
}

export interface ToolCallBlock {
  type: 'tool-call'
  /** Provider-assigned call id, echoed by the matching tool result. */
  id: string
  name: string
  /** Parsed arguments. When the model produced text that is not JSON, `args` is `undefined` and `rawArgs` holds the text. */
  args: unknown
  rawArgs?: string
}

export interface ToolResultBlock {
  type: 'tool-result'
  callId: string
  name: string
  content: TextBlock[]
  isError?: boolean
}

export type ContentBlock = TextBlock | ReasoningBlock | ToolCallBlock | ToolResultBlock

export interface UserMessage {
  role: 'user'
  content: (TextBlock | ToolResultBlock)[]
}

export interface AssistantMessage {
  role: 'assistant'
  content: (TextBlock | ReasoningBlock | ToolCallBlock)[]
}

export interface ToolMessage {
  role: 'tool'
  content: ToolResultBlock[]
}

export type Message = UserMessage | AssistantMessage | ToolMessage

export interface Usage {
  /** Every input token of the request, cached or not. */
  inputTokens: number
  outputTokens: number
  /** Of `inputTokens`, how many the provider served from its prefix cache (when it says). */
  cacheHitInputTokens?: number
  /** Of `inputTokens`, how many the provider wrote to its prefix cache (when it says; Anthropic prices them apart). */
  cacheWriteInputTokens?: number
  /** The model spec (`adapter:model`) that produced these tokens; set by the turn driver. */
  model?: string
}

/** Why the model stopped producing this response. */
export type { FinishReason } from '@dsh/base'

export function text(value: string): TextBlock {
  return { type: 'text', text: value }
}

export function userText(value: string): UserMessage {
  return { role: 'user', content: [text(value)] }
}

/** Concatenated text of the text blocks (reasoning and tool blocks are not text). */
export function textOf(blocks: readonly ContentBlock[]): string {
  let out = ''
  for (const block of blocks) if (block.type === 'text') out += block.text
  return out
}

export function toolCallsOf(message: AssistantMessage): ToolCallBlock[] {
  return message.content.filter((block): block is ToolCallBlock => block.type === 'tool-call')
}
