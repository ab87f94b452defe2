import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv'
import { ToolError } from './errors.js'

// One validator instance for every tool: compiled schemas are cached per definition.
const ajv = new Ajv({ allErrors: true, strict: false })

export type ArgumentValidator = (args: unknown) => string | undefined

/** Compile a tool's parameter schema; a schema that does not compile is a registration error. */
export function compileArguments(toolName: string, schema: Record<string, unknown>): ArgumentValidator {
  let validate: ValidateFunction
  try {
    validate = ajv.compile(schema)
  } catch (error) {
    throw new ToolError('INVALID_TOOL', `tool "${toolName}": its parameters are not a valid JSON Schema: ${(error as Error).message}`)
  }
  return (args) => (validate(args) ? undefined : describeErrors(validate.errors ?? []))
}

function describeErrors(errors: ErrorObject[]): string {
  return errors
    .map((error) => {
      const where = error.instancePath || '(arguments)'
      const extra = error.keyword === 'additionalProperties' ? ` (${String((error.params as { additionalProperty?: unknown }).additionalProperty)})` : ''
      return `${where} ${error.message ?? 'is invalid'}${extra}`
    })
    .join('; ')
}
