import type { Ajv, ErrorObject } from 'ajv'
import { ToolError } from './errors.js'
import { validateDraft07 } from './generated/draft07-meta-validator.js'

/** The problems with a call's arguments, one readable line; `undefined` when they are valid. */
export type ArgumentCheck = (args: unknown) => string | undefined

/** The generated meta-schema validator (see scripts/generate-meta-validator.mjs), typed. */
const checkAgainstMetaSchema = validateDraft07 as ((schema: unknown) => boolean) & { errors?: ErrorObject[] | null }

/** `$schema` values a tool's parameters may name: the draft ajv's default class validates. */
const DRAFT_07 = /^https?:\/\/json-schema\.org\/draft-07\/schema#?$/

/**
 * Check a tool's parameter schema at registration: it must be a valid JSON Schema
 * (draft-07, ajv's dialect), with patterns that compile. Costs microseconds and no ajv:
 * the meta-schema validator is generated ahead of time. Throws `INVALID_TOOL`.
 */
export function checkParameterSchema(toolName: string, schema: Record<string, unknown>): void {
  const invalid = (why: string) => new ToolError('INVALID_TOOL', `tool "${toolName}": its parameters are not a valid JSON Schema: ${why}`)
  if ('$schema' in schema && (typeof schema.$schema !== 'string' || !DRAFT_07.test(schema.$schema))) {
    throw invalid(`$schema ${JSON.stringify(schema.$schema)} is not supported; leave it out or name draft-07 (http://json-schema.org/draft-07/schema#)`)
  }
  if (!checkAgainstMetaSchema(schema)) throw invalid(describeErrors(checkAgainstMetaSchema.errors ?? [], (path) => `schema${path}`))
}

// One ajv for every tool, made on the first call that needs a validator: loading ajv and
// building it costs a short run (one that calls no tool) several milliseconds for nothing.
let sharedAjv: Promise<Ajv> | undefined

function loadAjv(): Promise<Ajv> {
  // Schemas were checked against the meta-schema at registration: ajv need not check them
  // again (that would compile the meta-schema, the costliest thing it does).
  sharedAjv ??= import('ajv').then(({ Ajv }) => new Ajv({ allErrors: true, strict: false, validateSchema: false }))
  return sharedAjv
}

/**
 * A tool's argument validator, compiled by ajv on the tool's first call (the schema was
 * checked at registration) and synchronous from then on: per-call validation on the
 * fan-out path costs what the compiled function costs.
 */
export class ToolArguments {
  private check: ArgumentCheck | undefined
  private compiling: Promise<ArgumentCheck> | undefined

  constructor(
    private readonly toolName: string,
    private readonly schema: Record<string, unknown>,
  ) {
    checkParameterSchema(toolName, schema)
  }

  /** What is wrong with `args` (`undefined`: nothing); a promise only until the validator is compiled. */
  validate(args: unknown): string | undefined | Promise<string | undefined> {
    if (this.check) return this.check(args)
    this.compiling ??= this.compile()
    return this.compiling.then((check) => check(args))
  }

  private async compile(): Promise<ArgumentCheck> {
    const ajv = await loadAjv()
    try {
      const validate = ajv.compile(this.schema)
      this.check = (args) => (validate(args) ? undefined : describeErrors(validate.errors ?? [], (path) => path || '(arguments)'))
    } catch (error) {
      // What the meta-schema cannot see (a `$ref` that resolves nowhere, an `$id` another
      // tool took): no call of this tool can be checked, so none runs, and each says why.
      const message = `they cannot be checked: the parameters of tool "${this.toolName}" are not a valid JSON Schema (${(error as Error).message}); fix the tool's schema`
      this.check = () => message
    }
    return this.check
  }
}

/** ajv's errors as one line; `where` names the place an error's JSON pointer points at. */
function describeErrors(errors: readonly ErrorObject[], where: (instancePath: string) => string): string {
  return errors
    .map((error) => {
      const extra = error.keyword === 'additionalProperties' ? ` (${String((error.params as { additionalProperty?: unknown }).additionalProperty)})` : ''
      return `${where(error.instancePath)} ${error.message ?? 'is invalid'}${extra}`
    })
    .join('; ')
}
