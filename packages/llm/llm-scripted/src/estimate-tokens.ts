import { assertNever } from '@dsh/base'
import type { ContentBlock, MessageHistory } from '@dsh/llm'

/** Roughly four characters a token: enough for usage accounting and context-size checks. */
const CHARS_PER_TOKEN = 4

/**
 * A rough figure for the request's new input: the system prompt and the latest message.
 * Deliberately not the whole history: measuring it would make every request cost time
 * proportional to the session (a fork of a 100,000-event parent would pay for all of it),
 * and a scripted model's usage only needs to be plausible, not exact.
 */
export function estimateInputTokens(system: string, messages: MessageHistory): number {
  const latest = messages.at(messages.length - 1)
  return Math.ceil((system.length + (latest ? charsOfContent(latest.content) : 0)) / CHARS_PER_TOKEN)
}

/**
 * A reply's output tokens from its text length and `charsOfContent` of its calls: the
 * split lets a reply's calls be measured once, not on every request.
 */
export function outputTokensOf(textChars: number, callChars: number): number {
  return Math.ceil((textChars + callChars) / CHARS_PER_TOKEN)
}

/** Characters `blocks` count for in a token estimate. */
export function charsOfContent(blocks: readonly ContentBlock[]): number {
  let chars = 0
  for (const block of blocks) {
    switch (block.type) {
      case 'text':
      case 'reasoning':
        chars += block.text.length
        break
      case 'tool-call':
        chars += block.name.length + (block.rawArgs ?? JSON.stringify(block.args) ?? '').length
        break
      case 'tool-result':
        chars += block.name.length + charsOfContent(block.content)
        break
      default:
        assertNever(block, 'content block')
    }
  }
  return chars
}
