import { describe, expect, it } from 'vitest'
import fc from 'fast-check'
import { Context } from 'cordis'
import { ToolRegistry, ToolError, type ToolAgent } from '@dsh/tools'

/**
 * Property tests of tool argument validation: whatever arguments a model sends, the call
 * gives the tool's result (the arguments were valid) or an error result that names the
 * tool and says what is wrong; `execute` never throws. Bounded so the suite stays fast.
 */
const RUNS = 300

const PARAMETERS = {
  type: 'object',
  properties: {
    path: { type: 'string', minLength: 1 },
    lines: { type: 'integer', minimum: 1, maximum: 1000 },
    mode: { enum: ['read', 'stat'] },
    tags: { type: 'array', items: { type: 'string' }, maxItems: 3 },
    options: { type: 'object', properties: { follow: { type: 'boolean' } }, additionalProperties: false },
  },
  required: ['path'],
  additionalProperties: false,
}

async function registryWithProbe() {
  const ctx = new Context()
  await ctx.plugin(ToolRegistry)
  const received: unknown[] = []
  ctx.tools.register({
    name: 'probe',
    description: 'records the arguments it runs with',
    parameters: PARAMETERS,
    execute: (args) => {
      received.push(args)
      return 'ran'
    },
  })
  return { ctx, received }
}

const exec = { signal: new AbortController().signal, callId: 'c1', agent: { id: 'agent-1' } as ToolAgent }

/** Arguments shaped like the schema's, often subtly wrong (types, bounds, unknown keys). */
const argsLike = fc.record(
  {
    path: fc.oneof(fc.string({ maxLength: 8 }), fc.integer(), fc.constant(null)),
    lines: fc.oneof(fc.integer({ min: -5, max: 1005 }), fc.double(), fc.string({ maxLength: 3 })),
    mode: fc.oneof(fc.constantFrom('read', 'stat', 'write'), fc.boolean()),
    tags: fc.oneof(fc.array(fc.string({ maxLength: 4 }), { maxLength: 5 }), fc.array(fc.integer(), { maxLength: 2 })),
    options: fc.oneof(fc.record({ follow: fc.boolean() }), fc.dictionary(fc.string({ maxLength: 5 }), fc.jsonValue({ maxDepth: 1 }), { maxKeys: 2 })),
    extra: fc.jsonValue({ maxDepth: 1 }),
  },
  { requiredKeys: [] },
)

describe('tool argument validation, under random and mutated input', () => {
  it('any value as arguments runs the tool when valid, else is an error result naming the tool; execute never throws', async () => {
    const { ctx, received } = await registryWithProbe()
    await fc.assert(
      fc.asyncProperty(fc.oneof(fc.anything({ maxDepth: 3 }), argsLike), async (args) => {
        const before = received.length
        const outcome = await ctx.tools.execute({ type: 'tool-call', id: 'c1', name: 'probe', args }, exec)
        const text = outcome.result.content.map((block) => block.text).join('')
        if (outcome.result.isError) {
          expect(text).toMatch(/^(invalid arguments for probe: .+|the arguments of probe are not valid JSON: .*)$/)
          expect(received.length).toBe(before)
        } else {
          expect(text).toBe('ran')
          expect(received.length).toBe(before + 1)
        }
      }),
      { numRuns: RUNS },
    )
  })

  it('arguments that were not JSON (raw text) are an error result quoting the text', async () => {
    const { ctx } = await registryWithProbe()
    await fc.assert(
      fc.asyncProperty(fc.string({ maxLength: 60, unit: 'binary' }), async (rawArgs) => {
        const outcome = await ctx.tools.execute({ type: 'tool-call', id: 'c1', name: 'probe', args: undefined, rawArgs }, exec)
        expect(outcome.result.isError).toBe(true)
        expect(outcome.result.content[0].text).toBe(`the arguments of probe are not valid JSON: ${rawArgs || '(empty)'}`)
      }),
      { numRuns: RUNS },
    )
  })

  it('random parameter schemas register or are refused with ToolError INVALID_TOOL', async () => {
    const ctx = new Context()
    await ctx.plugin(ToolRegistry)
    const keyword = fc.oneof(
      fc.record({ type: fc.constantFrom('object', 'string', 'integer', 'nonsense', 7) }, { requiredKeys: [] }),
      fc.record({ pattern: fc.string({ maxLength: 6 }) }),
      fc.record({ minLength: fc.oneof(fc.nat(3), fc.integer({ min: -2, max: -1 }), fc.string({ maxLength: 2 })) }),
      fc.record({ required: fc.oneof(fc.array(fc.string({ maxLength: 3 }), { maxLength: 2 }), fc.string({ maxLength: 3 })) }),
      fc.record({ $ref: fc.string({ maxLength: 8 }) }),
    )
    let index = 0
    fc.assert(
      fc.property(fc.array(keyword, { maxLength: 3 }), (parts) => {
        const parameters: Record<string, unknown> = Object.assign({}, ...parts)
        try {
          ctx.tools.register({ name: `t${index++}`, description: 'random schema', parameters, execute: () => 'ok' })
        } catch (error) {
          expect(error).toBeInstanceOf(ToolError)
          expect(error).toMatchObject({ code: 'INVALID_TOOL' })
        }
      }),
      { numRuns: RUNS },
    )
  })
})
