import type { AssistantMessage, TextBlock } from '@dsh/llm'

/**
 * The shared output-selection rule: the text of the last assistant message that has
 * any; else every streamed text fragment joined; else nothing. Partial output survives
 * cancellation and truncation because the last two fall-backs still see it.
 */
export function selectOutput(assistantMessages: Iterable<AssistantMessage>, streamedText = ''): TextBlock[] {
  let last: TextBlock[] | undefined
  for (const message of assistantMessages) {
    const texts = message.content.filter((block): block is TextBlock => block.type === 'text' && block.text.length > 0)
    if (texts.length > 0) last = texts
  }
  if (last) return last.map((block) => ({ type: 'text', text: block.text }))
  return streamedText ? [{ type: 'text', text: streamedText }] : []
}

export function outputText(output: readonly TextBlock[]): string {
  return output.map((block) => block.text).join('')
}
