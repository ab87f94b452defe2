import type { ContentBlock, Message, MessageHistory } from '@dsh/llm'

/** Roughly four characters a token: enough for usage accounting and context-size checks. */
const CHARS_PER_TOKEN = 4

/**
 * Characters per message, memoised: histories share their (immutable) message objects
 * from request to request, so a long session is not re-measured on every turn.
 */
const charsByMessage = new WeakMap<Message, number>()

export function estimateInputTokens(system: string, messages: MessageHistory): number {
  let chars = system.length
  for (const message of messages) chars += charsOfMessage(message)
  return Math.ceil(chars / CHARS_PER_TOKEN)
}

export function estimateOutputTokens(content: readonly ContentBlock[]): number {
  return Math.ceil(charsOfBlocks(content) / CHARS_PER_TOKEN)
}

function charsOfMessage(message: Message): number {
  let chars = charsByMessage.get(message)
  if (chars === undefined) {
    chars = charsOfBlocks(message.content)
    charsByMessage.set(message, chars)
  }
  return chars
}

function charsOfBlocks(blocks: readonly ContentBlock[]): number {
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
        chars += block.name.length + charsOfBlocks(block.content)
        break
      default:
        assertNever(block)
    }
  }
  return chars
}

function assertNever(value: never): never {
  throw new Error(`unexpected content block ${JSON.stringify(value)}`)
}
