import type { ProviderWording } from './wording.js'

export interface SubagentToolArgs {
  description: string
  prompt: string
  run_in_background?: boolean
}

/** The model-facing schema: `{ description, prompt, run_in_background? }`, nothing about providers. */
export function toolParameters(wording: ProviderWording, background: boolean): Record<string, unknown> {
  const properties: Record<string, unknown> = {
    description: { type: 'string', minLength: 1, description: 'A short (3-5 word) label for the task, shown to the user.' },
    prompt: { type: 'string', minLength: 1, description: wording.prompt },
  }
  if (background) {
    properties.run_in_background = { type: 'boolean', description: 'Start the subagent and return at once with a task id instead of waiting for its answer.' }
  }
  return { type: 'object', properties, required: ['description', 'prompt'], additionalProperties: false }
}
