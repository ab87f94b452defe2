import type { AssistantMessage, TextBlock } from './messages.js'

/**
 * The shared output-selection rule: what counts as "the answer" of a run of turns. The
 * text of the last assistant message that has any; else every streamed text fragment
 * joined; else nothing. Partial output survives cancellation and truncation because the
 * last two fall-backs still see it. Delegated runs, `dsh run` and `dsh acp` all use it.
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

/** The selected output as one string. */
export function outputText(output: readonly TextBlock[]): string {
  return output.map((block) => block.text).join('')
}
