import { describe, expect, it } from 'vitest'
import fc from 'fast-check'
import { readTopLevelFields } from '@dsh/acp-server'

describe('readTopLevelFields', () => {
  it('reads the id of any object from any prefix that holds the id whole, and never a nested one', () => {
    fc.assert(
      fc.property(
        fc.oneof(fc.integer(), fc.string(), fc.constant(null)),
        fc.dictionary(fc.string().filter((key) => key !== 'id'), fc.jsonValue(), { maxKeys: 4 }),
        fc.dictionary(fc.string().filter((key) => key !== 'id'), fc.jsonValue(), { maxKeys: 4 }),
        fc.nat(),
        (id, before, after, cut) => {
          const text = JSON.stringify({ ...before, nested: { id: 'not me' }, id, ...after })
          const idEnd = text.indexOf(`"id":${JSON.stringify(id)}`, text.indexOf('"nested"') + 20) + `"id":${JSON.stringify(id)}`.length
          // Any prefix that includes the delimiter after the id value.
          const prefix = text.slice(0, idEnd + 1 + (cut % (text.length - idEnd)))
          const fields = readTopLevelFields(prefix)
          expect(fields.id).toEqual(id)
          expect(fields.keys.has('nested')).toBe(true)
        },
      ),
      { numRuns: 300, seed: 12 },
    )
  })

  it('finds no id in a cut-off id, in a non-object, or in a nested object only', () => {
    expect(readTopLevelFields('{"jsonrpc":"2.0","id":12').id).toBeUndefined()
    expect(readTopLevelFields('[{"id":1}]').id).toBeUndefined()
    expect(readTopLevelFields('{"params":{"id":1},"method":"x"').id).toBeUndefined()
    expect(readTopLevelFields('{"method":"x","id":"a\\"b",').id).toBe('a"b')
  })
})
