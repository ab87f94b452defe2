import type { ToolOutput } from '@dsh/tools'
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js'

/** `text` cut to `max` characters, keeping its start and end (where errors and summaries usually are). */
export function bounded(text: string, max: number): string {
  if (text.length <= max) return text
  const note = `\n… (${text.length - max} characters cut from the middle of the result) …\n`
  const keep = Math.max(0, max - note.length)
  const head = Math.ceil(keep / 2)
  return text.slice(0, head) + note + text.slice(text.length - (keep - head))
}

/** One content block that is not text, in a line the model can read. */
function summary(block: Record<string, unknown>): string {
  const bytes = (data: unknown) => (typeof data === 'string' ? `, ${Math.floor((data.length * 3) / 4)} bytes` : '')
  switch (block.type) {
    case 'image':
    case 'audio':
      return `[${block.type}: ${String(block.mimeType)}${bytes(block.data)}; not shown]`
    case 'resource_link':
      return `[resource link: ${String(block.uri)}${typeof block.name === 'string' ? ` (${block.name})` : ''}]`
    case 'resource': {
      const resource = (block.resource ?? {}) as Record<string, unknown>
      if (typeof resource.text === 'string') return `[resource ${String(resource.uri)}]\n${resource.text}`
      return `[resource ${String(resource.uri)}: ${String(resource.mimeType ?? 'binary')}${bytes(resource.blob)}; not shown]`
    }
    default:
      return `[content of type ${JSON.stringify(block.type)}; not shown]`
  }
}

/**
 * An MCP result as the model reads it: text blocks joined, other blocks summarised, the
 * structured content as JSON when there is no text, bounded to `maxChars`; `isError` stays
 * an error result.
 */
export function renderResult(result: CallToolResult, maxChars: number): ToolOutput {
  const blocks = Array.isArray(result.content) ? (result.content as Record<string, unknown>[]) : []
  const parts = blocks.map((block) => (block.type === 'text' && typeof block.text === 'string' ? block.text : summary(block)))
  let text = parts.join('\n')
  if (text === '' && result.structuredContent !== undefined) text = JSON.stringify(result.structuredContent)
  if (text === '') text = result.isError ? '(the tool failed and said nothing)' : '(no output)'
  return { content: bounded(text, maxChars), ...(result.isError === true && { isError: true }) }
}
