import type { ProviderWording } from './wording.js'

export interface SubagentToolArgs {
  description: string
  prompt: string
  run_in_background?: boolean
}

/** The model-facing schema: `{ description, prompt, run_in_background? }`, nothing about providers. */
export function toolParameters(wording: ProviderWording, background: boolean, continuable = false): Record<string, unknown> {
  const properties: Record<string, unknown> = {
    description: { type: 'string', minLength: 1, description: 'A short (3-5 word) label for the task, shown to the user.' },
    prompt: { type: 'string', minLength: 1, description: wording.prompt },
  }
  if (continuable) {
    // Kept so a call that sets it is not refused; it changes nothing.
    properties.run_in_background = { type: 'boolean', description: 'Always on for this tool: it returns the subagent\'s id at once.' }
  } else if (background) {
    properties.run_in_background = { type: 'boolean', description: 'Start the subagent and return at once with a task id instead of waiting for its answer.' }
  }
  return { type: 'object', properties, required: ['description', 'prompt'], additionalProperties: false }
}
