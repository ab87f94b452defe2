import { textOf, type Message, type MessageHistory, type ToolResultBlock } from '@dsh/llm'

/**
 * Text of the latest tool result in the history: the last message carrying tool-result
 * blocks (a `tool` message, or a `user` message that carries results), each result's text
 * blocks concatenated and several results joined by newlines. Empty when there is none.
 */
export function lastToolResultText(messages: MessageHistory): string {
  for (let i = messages.length - 1; i >= 0; i--) {
    const results = toolResultsOf(messages.at(i))
    if (results.length > 0) return results.map((result) => textOf(result.content)).join('\n')
  }
  return ''
}

function toolResultsOf(message: Message | undefined): ToolResultBlock[] {
  const results: ToolResultBlock[] = []
  if (!message || message.role === 'assistant') return results
  for (const block of message.content) if (block.type === 'tool-result') results.push(block)
  return results
}

/**
 * Text of every tool result after the last assistant message (the results of the latest
 * step, in model order), one per line. Empty when the latest message is not a result.
 */
export function stepToolResultsText(messages: MessageHistory): string {
  const texts: string[] = []
  for (let i = messages.length - 1; i >= 0; i--) {
    const message = messages.at(i)
    if (!message || message.role === 'assistant') break
    const results = toolResultsOf(message)
    for (let j = results.length - 1; j >= 0; j--) texts.push(textOf(results[j].content))
  }
  return texts.reverse().join('\n')
}
