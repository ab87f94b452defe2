import { RequestError, type ContentBlock } from '@agentclientprotocol/sdk'
import { text, type TextBlock, type UserMessage } from '@dsh/llm'

/**
 * An ACP prompt as a dsh user message. Text is text; a resource link is named so the
 * agent can open it with its own tools; an embedded text resource is inlined with its
 * uri. Images, audio and binary resources are refused: the server does not advertise
 * them, so a client that sends one has ignored the capabilities.
 */
export function promptMessage(blocks: readonly ContentBlock[]): UserMessage {
  const content: TextBlock[] = []
  for (const block of blocks) {
    switch (block.type) {
      case 'text':
        content.push(text(block.text))
        break
      case 'resource_link':
        content.push(text(`[${block.title ?? block.name}](${block.uri})`))
        break
      case 'resource':
        if (!('text' in block.resource)) throw RequestError.invalidParams({ uri: block.resource.uri }, 'binary resources are not supported; embed text or send a resource_link')
        content.push(text(`<resource uri="${block.resource.uri}">\n${block.resource.text}\n</resource>`))
        break
      case 'image':
      case 'audio':
        throw RequestError.invalidParams({ type: block.type }, `${block.type} prompts are not supported (promptCapabilities.${block.type} is false)`)
      default: {
        const unknown: never = block
        throw RequestError.invalidParams({ block: unknown }, 'unknown content block type')
      }
    }
  }
  if (content.length === 0) throw RequestError.invalidParams(undefined, 'the prompt has no content')
  return { role: 'user', content }
}
