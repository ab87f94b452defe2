import { describe, expect, it } from 'vitest'
import fc from 'fast-check'
import { stringify as toYaml } from 'yaml'
import { compileScriptText, ScriptError, type Script } from '../src/index.js'

/**
 * Property tests of the script-file parser: whatever text a script file holds, reading it
 * gives a compiled script or a `ScriptError('INVALID_SCRIPT')` naming the file, never
 * another kind of error. Bounded in runs so the suite stays fast.
 */
const SOURCE = '/scripts/demo.yml'
const RUNS = 300

/** A compiled script, or the error; anything else thrown fails the property. */
function read(text: string, format: 'yaml' | 'json'): 'ok' | 'invalid' {
  try {
    const compiled = compileScriptText(text, SOURCE, format)
    expect(compiled.rules.length).toBeGreaterThan(0)
    return 'ok'
  } catch (error) {
    expect(error).toBeInstanceOf(ScriptError)
    expect(error).toMatchObject({ code: 'INVALID_SCRIPT' })
    expect((error as Error).message.startsWith(`${SOURCE}: `)).toBe(true)
    return 'invalid'
  }
}

const toolCall = fc.record({ tool: fc.string({ maxLength: 12 }), args: fc.dictionary(fc.string({ maxLength: 6 }), fc.jsonValue({ maxDepth: 2 }), { maxKeys: 3 }) }, { requiredKeys: ['tool'] })
const reply = fc.record(
  {
    text: fc.string({ maxLength: 30 }),
    call: toolCall,
    calls: fc.array(toolCall, { maxLength: 3 }),
    error: fc.string({ maxLength: 20 }),
    // JSON has no NaN or Infinity (they become null), so the two spellings would differ.
    delay_ms: fc.oneof(fc.nat(50), fc.integer({ min: -5, max: 5 }), fc.double({ noNaN: true, noDefaultInfinity: true })),
  },
  { requiredKeys: [] },
)
const rule = fc.record(
  {
    when: fc.option(fc.record({ prompt: fc.string({ maxLength: 12 }), depth: fc.oneof(fc.nat(4), fc.integer({ min: -3, max: 3 }), fc.string({ maxLength: 3 })) }, { requiredKeys: [] })),
    reply: fc.array(reply, { maxLength: 4 }),
  },
  { requiredKeys: ['reply'] },
)
/** Script-shaped values: mostly plausible, often subtly wrong (negative depths, bad regexes, empty lists). */
const scriptLike = fc.oneof(fc.array(rule, { maxLength: 4 }), fc.record({ rules: fc.array(rule, { maxLength: 4 }) }))

/** One edit of the text: a character inserted, deleted or replaced at a random position. */
const mutation = fc.tuple(fc.nat(), fc.constantFrom('insert', 'delete', 'replace'), fc.string({ minLength: 1, maxLength: 3, unit: 'binary' }))
function mutate(text: string, edits: ReadonlyArray<readonly [number, string, string]>): string {
  let out = text
  for (const [at, kind, piece] of edits) {
    const index = out.length === 0 ? 0 : at % out.length
    if (kind === 'insert') out = out.slice(0, index) + piece + out.slice(index)
    else if (kind === 'delete') out = out.slice(0, index) + out.slice(index + 1)
    else out = out.slice(0, index) + piece + out.slice(index + 1)
  }
  return out
}

const VALID: Script = [
  { when: { prompt: '^list (the )?files', depth: 0 }, reply: [{ text: 'Let me look.', call: { tool: 'ls', args: { path: '.' } } }, { text: 'Found: {{last_tool_result}}' }] },
  { reply: [{ delay_ms: 5, calls: [{ tool: 'read', args: { path: 'a' } }] }, { error: 'overloaded' }] },
]

describe('the script-file parser, under random and mutated input', () => {
  it('any text, read as YAML or JSON, compiles or is a clear INVALID_SCRIPT error', () => {
    fc.assert(
      fc.property(fc.string({ maxLength: 200, unit: 'binary' }), fc.constantFrom('yaml' as const, 'json' as const), (text, format) => {
        read(text, format)
      }),
      { numRuns: RUNS },
    )
  })

  it('script-shaped values, written as YAML and as JSON, compile or are refused with the same verdict', () => {
    fc.assert(
      fc.property(scriptLike, (value) => {
        expect(read(toYaml(value), 'yaml')).toBe(read(JSON.stringify(value), 'json'))
      }),
      { numRuns: RUNS / 2 },
    )
  })

  it('a valid script with a few characters edited compiles or is a clear error', () => {
    const yaml = toYaml(VALID)
    const json = JSON.stringify(VALID)
    expect(read(yaml, 'yaml')).toBe('ok')
    fc.assert(
      fc.property(fc.array(mutation, { minLength: 1, maxLength: 4 }), (edits) => {
        read(mutate(yaml, edits), 'yaml')
        read(mutate(json, edits), 'json')
      }),
      { numRuns: RUNS },
    )
  })
})
