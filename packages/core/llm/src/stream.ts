import type { FinishReason, ToolCallBlock, Usage } from './messages.js'

/**
 * What an adapter yields while a response streams. Tool calls arrive whole: an adapter
 * assembles argument fragments itself, so the loop never sees half a call.
 */
export type LlmChunk =
  | { type: 'text-delta'; text: string }
  | { type: 'reasoning-delta'; text: string }
  | { type: 'tool-call'; call: ToolCallBlock }
  | { type: 'usage'; usage: Usage }
  | { type: 'finish'; reason: FinishReason }
