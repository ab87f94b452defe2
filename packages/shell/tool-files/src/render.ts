import type { ToolOutput } from '@dsh/tools'
import { FileToolError } from './errors.js'

/**
 * `text` cut to at most `maxChars` at a line boundary, with a last line saying what was
 * left out and how to see it: what a tool result may cost the model's context is bounded
 * whatever the file or the search held.
 */
export function bounded(text: string, maxChars: number, howToSeeMore: string): string {
  if (text.length <= maxChars) return text
  const cut = text.lastIndexOf('\n', maxChars)
  const kept = text.slice(0, cut > 0 ? cut : maxChars)
  return `${kept}\n… (output cut at ${kept.length} of ${text.length} characters; ${howToSeeMore})`
}

/** One line at most `maxChars` long, marked when cut. */
export function cutLine(line: string, maxChars: number): string {
  return line.length <= maxChars ? line : `${line.slice(0, maxChars)}… (line cut at ${maxChars} characters)`
}

/**
 * The result of a refused call: its one line, as an error the model reads. Anything other
 * than a `FileToolError` is a fault of ours, not the call's, and is left to the tool
 * registry to report.
 */
export function refusal(tool: string, error: unknown): ToolOutput {
  if (error instanceof FileToolError) return { isError: true, content: `${tool}: ${error.message}` }
  throw error
}
