import { readFileSync } from 'node:fs'
import { describe, expect, it } from 'vitest'
import fc from 'fast-check'
import { Ajv } from 'ajv'
import { Context } from 'cordis'
import { ToolRegistry, type ToolAgent, type ToolDefinition } from '@dsh/tools'
// @ts-expect-error: a build script without type declarations
import { generateMetaValidator, outputFile } from '../scripts/generate-meta-validator.mjs'

/**
 * A tool's parameter schema is checked at registration by a meta-schema validator
 * generated ahead of time, and compiled by ajv on the tool's first call. These tests hold
 * the generated check to ajv's own verdict and the lazy compile to the registry's contract.
 */
async function registry() {
  const ctx = new Context()
  await ctx.plugin(ToolRegistry)
  return ctx
}

const tool = (name: string, parameters: Record<string, unknown>, ran: unknown[] = []): ToolDefinition => ({
  name,
  description: `the ${name} tool`,
  parameters,
  execute: (args) => {
    ran.push(args)
    return 'ran'
  },
})

const exec = { signal: new AbortController().signal, callId: 'c1', agent: { id: 'agent-1' } as ToolAgent }
const call = (name: string, args: unknown, id = 'c1') => ({ type: 'tool-call' as const, id, name, args })

/** ajv's verdict on a schema, as the registry compiled every schema before the check was generated. */
function ajvAccepts(schema: Record<string, unknown>): boolean {
  try {
    new Ajv({ allErrors: true, strict: false, logger: false }).compile(schema)
    return true
  } catch {
    // ajv throws for every schema it refuses; that refusal is the verdict.
    return false
  }
}

function registryAccepts(ctx: Context, name: string, schema: Record<string, unknown>): boolean {
  try {
    ctx.tools.register(tool(name, schema))
    return true
  } catch {
    // register throws INVALID_TOOL for a schema it refuses; that refusal is the verdict.
    return false
  }
}

/** Schemas built from draft-07 keywords with values of the right and of the wrong kinds. */
const schemaValue: fc.Arbitrary<unknown> = fc.letrec((tie) => ({
  schema: fc.dictionary(
    fc.constantFrom('type', 'properties', 'items', 'required', 'enum', 'minimum', 'maxLength', 'pattern', 'additionalProperties', 'anyOf', 'not', 'description', 'uniqueItems', 'x-extension'),
    fc.oneof(
      { depthSize: 'small' },
      fc.constantFrom('string', 'object', 'nonsense', 'integer'),
      fc.constantFrom(['string', 'null'], ['string', 'string'], [], ['a', 'b']),
      fc.constantFrom('^a+$', '[', '(?<x>a)', '\\p{L}'),
      fc.integer({ min: -2, max: 5 }),
      fc.boolean(),
      fc.dictionary(fc.constantFrom('a', 'b'), tie('schema'), { maxKeys: 2 }),
      fc.array(tie('schema'), { maxLength: 2 }),
      tie('schema'),
    ),
    { maxKeys: 4 },
  ),
})).schema

describe('parameter schemas', () => {
  it('the committed meta-schema validator is what the generator makes from the installed ajv', () => {
    expect(readFileSync(outputFile, 'utf8')).toBe(generateMetaValidator())
  })

  it('registration accepts exactly the schemas ajv compiles (generated schemas)', async () => {
    const ctx = await registry()
    let n = 0
    fc.assert(
      fc.property(schemaValue, (schema) => {
        const parameters = schema as Record<string, unknown>
        expect(registryAccepts(ctx, `t${n++}`, parameters)).toBe(ajvAccepts(parameters))
      }),
      { numRuns: 150 },
    )
  })

  it('a pattern that is not a regular expression is refused at registration, naming where it is', async () => {
    const ctx = await registry()
    expect(() => ctx.tools.register(tool('grep', { type: 'object', properties: { q: { type: 'string', pattern: '[' } } }))).toThrow(
      /tool "grep": its parameters are not a valid JSON Schema: schema\/properties\/q\/pattern must match format "regex"/,
    )
    expect(() => ctx.tools.register(tool('grep', { type: 'object', patternProperties: { '(': {} } }))).toThrow(/not a valid JSON Schema/)
    expect(ctx.tools.list()).toEqual([])
  })

  it('a $schema naming another draft is refused at registration; draft-07 is accepted', async () => {
    const ctx = await registry()
    expect(() => ctx.tools.register(tool('newer', { $schema: 'https://json-schema.org/draft/2020-12/schema', type: 'object' }))).toThrow(/\$schema .* is not supported/)
    ctx.tools.register(tool('draft7', { $schema: 'http://json-schema.org/draft-07/schema#', type: 'object' }))
    expect(ctx.tools.list()).toEqual(['draft7'])
  })

  it('concurrent first calls of a tool each get their own verdict from one compiled validator', async () => {
    const ctx = await registry()
    const ran: unknown[] = []
    ctx.tools.register(tool('count', { type: 'object', properties: { n: { type: 'integer' } }, required: ['n'] }, ran))
    const outcomes = await Promise.all([
      ctx.tools.execute(call('count', { n: 1 }, 'a'), exec),
      ctx.tools.execute(call('count', { n: 'two' }, 'b'), exec),
      ctx.tools.execute(call('count', { n: 3 }, 'c'), exec),
    ])
    expect(outcomes.map((outcome) => outcome.result.isError === true)).toEqual([false, true, false])
    expect(outcomes[1].result.content[0].text).toBe('invalid arguments for count: /n must be integer')
    expect(ran).toEqual([{ n: 1 }, { n: 3 }])
    const later = await ctx.tools.execute(call('count', {}, 'd'), exec)
    expect(later.result.content[0].text).toBe("invalid arguments for count: (arguments) must have required property 'n'")
  })

  it('a schema only ajv can refuse (a $ref to nowhere) runs no call, and every call says why', async () => {
    const ctx = await registry()
    const ran: unknown[] = []
    ctx.tools.register(tool('dangling', { type: 'object', properties: { a: { $ref: '#/definitions/missing' } } }, ran))
    for (const id of ['a', 'b']) {
      const outcome = await ctx.tools.execute(call('dangling', { a: 1 }, id), exec)
      expect(outcome.result.isError).toBe(true)
      expect(outcome.result.content[0].text).toMatch(/^invalid arguments for dangling: they cannot be checked: the parameters of tool "dangling" are not a valid JSON Schema \(.*missing.*\); fix the tool's schema$/)
    }
    expect(ran).toEqual([])
  })

  it('a tool removed while its first call\'s validator compiles is not run', async () => {
    const ctx = await registry()
    const ran: unknown[] = []
    const unregister = ctx.tools.register(tool('fleeting', { type: 'object', properties: { n: { type: 'integer' } } }, ran))
    const pending = ctx.tools.execute(call('fleeting', { n: 1 }), exec)
    // The first call is waiting for its validator; the tool's plugin goes away meanwhile.
    unregister()
    const outcome = await pending
    expect(outcome.result.isError).toBe(true)
    expect(outcome.result.content[0].text).toBe('fleeting was not run: the tool was removed before the call could run')
    expect(ran).toEqual([])
  })
})
