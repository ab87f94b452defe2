import { describe, expect, it } from 'vitest'
import fc from 'fast-check'
import { DESCRIPTOR_VERSION, makeDescriptor, parseDescriptor } from '@dsh/subagent'

describe('continuable descriptor', () => {
  it('what makeDescriptor writes reads back unchanged, with only the fields that were set', () => {
    const descriptor = makeDescriptor({ provider: 'spawn', label: 'audit', model: 'scripted:x', toolFilter: { deny: ['bash'] } })
    expect(descriptor).toEqual({ version: DESCRIPTOR_VERSION, mode: 'continuable', provider: 'spawn', label: 'audit', model: 'scripted:x', toolFilter: { deny: ['bash'] } })
    expect(parseDescriptor(JSON.parse(JSON.stringify(descriptor)))).toEqual({ descriptor })
  })

  it.each([
    [undefined, 'no continuable descriptor'],
    ['text', 'not an object'],
    [{ version: 2, mode: 'continuable', provider: 'spawn', label: 'x' }, 'version 2; this build reads version 1'],
    [{ version: 1, mode: 'one-shot', provider: 'spawn', label: 'x' }, 'mode "one-shot"'],
    [{ version: 1, mode: 'continuable', provider: '', label: 'x' }, 'provider must be non-empty text'],
    [{ version: 1, mode: 'continuable', provider: 'spawn', label: 'x', extra: 1 }, 'unknown fields: extra'],
    [{ version: 1, mode: 'continuable', provider: 'spawn', label: 'x', toolFilter: {} }, 'toolFilter'],
    [{ version: 1, mode: 'continuable', provider: 'spawn', label: 'x', toolFilter: { allow: [1] } }, 'toolFilter'],
    [{ version: 1, mode: 'continuable', provider: 'acp', label: 'x', remote: { remoteId: '' } }, 'remote record'],
  ])('refuses %j, saying why', (value, why) => {
    const parsed = parseDescriptor(value)
    expect('problem' in parsed && parsed.problem).toContain(why)
  })

  it('never throws on arbitrary JSON, and accepts only what it can rebuild a child from', () => {
    fc.assert(
      fc.property(fc.jsonValue(), (value) => {
        const parsed = parseDescriptor(value)
        if ('descriptor' in parsed) expect(parsed.descriptor.version).toBe(DESCRIPTOR_VERSION)
      }),
      { numRuns: 300 },
    )
  })
})
