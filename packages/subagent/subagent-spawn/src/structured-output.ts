import type { Context } from 'cordis'
import type {} from '@dsh/tools'

export const STRUCTURED_OUTPUT_TOOL = 'structured_output'

/** Where the child's validated structured output lands. */
export interface StructuredSlot {
  value?: unknown
  received: boolean
}

/**
 * Give one child a `structured_output` tool whose parameters are the requested schema.
 * The tool pipeline validates the arguments (an invalid call is an error result the
 * model can correct); a valid call records the value and ends the child's turn. A schema
 * that is not an object schema is wrapped as `{ value }`, since tool arguments are objects.
 */
export function registerStructuredOutput(childCtx: Context, schema: Record<string, unknown>): StructuredSlot {
  const slot: StructuredSlot = { received: false }
  const wrapped = schema.type !== 'object'
  childCtx.tools.register({
    name: STRUCTURED_OUTPUT_TOOL,
    description: `Return your final answer as structured data${wrapped ? ' in the `value` field' : ''}. Calling it with valid arguments ends your turn.`,
    parameters: wrapped ? { type: 'object', properties: { value: schema }, required: ['value'], additionalProperties: false } : schema,
    execute(args) {
      slot.value = wrapped ? (args as { value: unknown }).value : args
      slot.received = true
      return { content: 'structured output recorded', endsTurn: true }
    },
  })
  return slot
}
