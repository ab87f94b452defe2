/**
 * The config file parser and the strict key check against random and mutated YAML: every
 * input ends as a list of valid entries or a CompositionError, never another exception.
 */
import SubagentToolPlugin from '@dsh/tool-subagent'
import fc from 'fast-check'
import YAML from 'yaml'
import { describe, expect, it } from 'vitest'
import { checkConfigKeys, CompositionError, parseEntries, type PluginEntry } from '../src/compose.js'

const FILE = '/config/dsh.yml'

const seeds = [
  '- id: tool-subagent\n  name: "@dsh/tool-subagent"\n  config:\n    provider: spawn\n    toolFilter: { allow: [bash], deny: [] }\n',
  'plugins:\n  - name: "@dsh/agent"\n    config: { maxSteps: 3 }\n  - name: ./local.js\n    disabled: true\n',
  '[{ "name": "@dsh/tool-bash", "config": { "defaultTimeoutMs": 1000 } }]\n',
  '- name: "@dsh/tool-subagent"\n  id: a\n  config: &shared { provider: acp, agentOptions: { model: "scripted:x" } }\n- name: "@dsh/tool-subagent"\n  id: b\n  config: *shared\n',
]

/** A seed with a few characters inserted, deleted or replaced at random places. */
const mutated = fc
  .tuple(
    fc.constantFrom(...seeds),
    fc.array(fc.tuple(fc.constantFrom('insert', 'delete', 'replace'), fc.nat(), fc.constantFrom(...': -[]{}\n\t"\'&*!|>#%@`,?\\'.split(''), 'name', 'config', '\u0000', 'é', '~', '0x1F')), { minLength: 1, maxLength: 6 }),
  )
  .map(([seed, edits]) =>
    edits.reduce((text, [kind, at, piece]) => {
      const index = text.length === 0 ? 0 : at % text.length
      if (kind === 'insert') return text.slice(0, index) + piece + text.slice(index)
      if (kind === 'delete') return text.slice(0, index) + text.slice(index + 1 + (at % 3))
      return text.slice(0, index) + piece + text.slice(index + piece.length)
    }, seed),
  )

/** Structurally random documents: any JSON value, and entry-shaped values with random parts. */
const entryShaped = fc.array(
  fc.record(
    {
      id: fc.oneof(fc.string(), fc.integer(), fc.constant(null)),
      name: fc.oneof(fc.constantFrom('@dsh/tool-subagent', './x.js'), fc.string(), fc.integer()),
      config: fc.oneof(fc.dictionary(fc.string(), fc.jsonValue()), fc.jsonValue()),
      disabled: fc.oneof(fc.boolean(), fc.string()),
      extra: fc.jsonValue(),
    },
    { requiredKeys: [] },
  ),
  { maxLength: 4 },
)
const documents = fc.oneof(
  fc.string({ unit: 'binary', maxLength: 200 }),
  mutated,
  fc.jsonValue().map((value) => YAML.stringify(value)),
  entryShaped.map((value) => YAML.stringify(value)),
  entryShaped.map((value) => YAML.stringify({ plugins: value })),
)

function parseOutcome(text: string): PluginEntry[] | CompositionError {
  try {
    return parseEntries(text, FILE)
  } catch (error) {
    if (error instanceof CompositionError) return error
    throw error
  }
}

describe('config file parser (property)', () => {
  it('random and mutated YAML gives valid entries or a CompositionError naming the file on its first line (a syntax error quotes its source below), never another exception', () => {
    fc.assert(
      fc.property(documents, (text) => {
        const outcome = parseOutcome(text)
        if (outcome instanceof CompositionError) {
          const [first, ...rest] = outcome.message.split('\n')
          expect(first).toContain(FILE)
          // One line, but for a syntax error, which quotes the offending source below it, indented.
          if (outcome.code !== 'CONFIG_SYNTAX') expect(rest).toEqual([])
          else expect(rest.every((line) => line.startsWith('    '))).toBe(true)
          return
        }
        const ids = new Set<string>()
        for (const entry of outcome) {
          expect(typeof entry.name).toBe('string')
          expect(entry.name.length).toBeGreaterThan(0)
          expect(typeof entry.id).toBe('string')
          expect(ids.has(entry.id)).toBe(false)
          ids.add(entry.id)
          if (entry.config !== undefined) expect(typeof entry.config === 'object' && entry.config !== null && !Array.isArray(entry.config)).toBe(true)
        }
      }),
      { numRuns: 400, seed: 20261130 },
    )
  })

  it('the strict key check on any parsed config passes or throws a CompositionError', () => {
    fc.assert(
      fc.property(fc.oneof(mutated, entryShaped.map((value) => YAML.stringify(value))), (text) => {
        const outcome = parseOutcome(text)
        if (outcome instanceof CompositionError) return
        for (const entry of outcome) {
          try {
            checkConfigKeys(entry, SubagentToolPlugin)
          } catch (error) {
            expect(error).toBeInstanceOf(CompositionError)
            expect((error as CompositionError).code).toBe('UNKNOWN_KEY')
          }
        }
      }),
      { numRuns: 300, seed: 20261201 },
    )
  })
})
