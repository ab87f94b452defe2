import SubagentToolPlugin from '@dsh/tool-subagent'
import Schema from 'schemastery'
import { describe, expect, it } from 'vitest'
import { checkConfigKeys, CompositionError, unknownConfigKeys } from '../src/compose.js'

const entry = (config: Record<string, unknown>) => ({ id: 'tool-subagent', name: '@dsh/tool-subagent', config })

describe('strict config keys', () => {
  it('a misspelt nested key of a real plugin is an error naming the entry and the key path', () => {
    const check = () => checkConfigKeys(entry({ provider: 'spawn', toolFilter: { alow: ['bash'] } }), SubagentToolPlugin)
    expect(check).toThrow(CompositionError)
    expect(check).toThrow('plugin "tool-subagent" (@dsh/tool-subagent): unknown config key "toolFilter.alow" (allowed there: allow, deny)')
  })

  it('a real plugin config with only declared keys at every depth passes', () => {
    expect(() => checkConfigKeys(entry({ provider: 'spawn', toolFilter: { allow: ['bash'], deny: [] }, agentOptions: { model: 'scripted:x' } }), SubagentToolPlugin)).not.toThrow()
  })

  it('a misspelt top-level key of a real plugin lists the keys allowed there', () => {
    expect(() => checkConfigKeys(entry({ provider: 'spawn', maxDepht: 2 }), SubagentToolPlugin)).toThrow(/unknown config key "maxDepht" \(allowed there: .*maxDepth/)
  })

  it('the error has code UNKNOWN_KEY and names every unknown key at once', () => {
    let caught: unknown
    try {
      checkConfigKeys(entry({ provider: 'spawn', toolFilter: { alow: [], dney: [] }, extra: 1 }), SubagentToolPlugin)
    } catch (error) {
      caught = error
    }
    expect(caught).toBeInstanceOf(CompositionError)
    expect((caught as CompositionError).code).toBe('UNKNOWN_KEY')
    expect((caught as CompositionError).message).toMatch(/unknown config keys "toolFilter.alow" .*"toolFilter.dney" .*"extra"/)
  })

  it('a plugin without a Config schema takes no keys', () => {
    expect(() => checkConfigKeys({ id: 'p', name: './p.js', config: { a: 1 } }, { apply() {} })).toThrow('unknown config key "a" (nothing is configurable there)')
  })

  it('walks dict values, array items and tuple items', () => {
    const schema = Schema.object({
      servers: Schema.dict(Schema.object({ url: Schema.string() })),
      hooks: Schema.array(Schema.object({ on: Schema.string() })),
      pair: Schema.tuple([Schema.object({ a: Schema.number() }), Schema.string()]),
    })
    const found = unknownConfigKeys(schema, { servers: { main: { url: 'x', urll: 'y' } }, hooks: [{ on: 'a' }, { onn: 'b' }], pair: [{ b: 1 }, 'x'] })
    expect(found.map((unknown) => unknown.path)).toEqual(['servers.main.urll', 'hooks[1].onn', 'pair[0].b'])
    expect(found[0].allowed).toEqual(['url'])
  })

  it('a key that is not an identifier is quoted in the path', () => {
    const schema = Schema.object({ env: Schema.dict(Schema.object({ value: Schema.string() })) })
    expect(unknownConfigKeys(schema, { env: { 'my key': { valu: 'x' } } }).map((unknown) => unknown.path)).toEqual(['env["my key"].valu'])
  })

  it('a union passes when some branch that accepts the value declares all its keys', () => {
    const schema = Schema.object({
      target: Schema.union([Schema.string(), Schema.object({ host: Schema.string(), port: Schema.natural() }), Schema.object({ socket: Schema.string() })]),
    })
    expect(unknownConfigKeys(schema, { target: 'localhost' })).toEqual([])
    expect(unknownConfigKeys(schema, { target: { socket: '/tmp/s' } })).toEqual([])
    expect(unknownConfigKeys(schema, { target: { host: 'h', prot: 1 } }).map((unknown) => unknown.path)).toEqual(['target.prot'])
  })

  it('an intersection knows the keys of every branch', () => {
    const schema = Schema.intersect([Schema.object({ a: Schema.string() }), Schema.object({ b: Schema.object({ c: Schema.string() }) })])
    expect(unknownConfigKeys(schema, { a: 'x', b: { c: 'y' } })).toEqual([])
    expect(unknownConfigKeys(schema, { a: 'x', b: { d: 'y' }, e: 1 }).map((unknown) => unknown.path).sort()).toEqual(['b.d', 'e'])
  })

  it('values inside `any` and scalar schemas are not inspected', () => {
    const schema = Schema.object({ scripts: Schema.dict(Schema.any()), name: Schema.string() })
    expect(unknownConfigKeys(schema, { scripts: { demo: [{ anything: true }] }, name: 'x' })).toEqual([])
  })
})
