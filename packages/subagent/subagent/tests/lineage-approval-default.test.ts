/**
 * The approvals default as a lineage field: what the parent's broker decides with nobody to
 * ask travels on every wire and into the child's header; a malformed value refuses the
 * lineage (never guessed); the parent's broker is asked by shape, and a parent without one,
 * or whose tree's own lineage did not say, hands on nothing.
 */
import { describe, expect, it } from 'vitest'
import { A2A_LINEAGE, ACP_LINEAGE, QUEUE_LINEAGE, lineageHeader, lineageOf } from '../src/index.js'

const quiet = { warn: () => {} }

/** A parent whose context holds a broker answering `defaultFor` with `found` (or no broker). */
function parentWith(found?: { decision: 'allow' | 'reject'; bound?: 'lineage' | 'unsaid' }): Parameters<typeof lineageOf>[0]['parent'] {
  const approvals = found === undefined ? undefined : { defaultFor: () => found }
  return { id: 'parent-session', depth: 0, session: { header: {} }, ctx: { get: (name: string) => (name === 'approvals' ? approvals : undefined) } } as unknown as Parameters<typeof lineageOf>[0]['parent']
}

describe('the approvals default on the lineage', () => {
  it.each([ACP_LINEAGE, A2A_LINEAGE, QUEUE_LINEAGE])('%#: travels on the wire and into the header', (wire) => {
    const sent = wire.encode({ parentSession: 'p', delegationDepth: 1, provider: 'x', approvalDefault: 'reject' })
    expect(sent.approvalDefault).toBe('reject')
    const read = wire.decode(JSON.parse(JSON.stringify(sent)), quiet)
    expect(read.approvalDefault).toBe('reject')
    expect(lineageHeader(read).approvalDefault).toBe('reject')
  })

  it.each([ACP_LINEAGE, A2A_LINEAGE, QUEUE_LINEAGE])('%#: a malformed value refuses the lineage, naming the field', (wire) => {
    for (const bad of ['ask', 'ALLOW', true, { allow: true }]) {
      expect(() => wire.decode({ parentSession: 'p', approvalDefault: bad }, quiet)).toThrow(/approvalDefault must be "allow" or "reject"/)
    }
  })

  it("a child is told its parent's broker's default for the parent's tree; nothing without a broker, or when the tree's lineage did not say", () => {
    const of = (parent: ReturnType<typeof parentWith>) => lineageOf({ parent, label: 'x' }, 'queue', undefined).approvalDefault
    expect(of(parentWith({ decision: 'allow' }))).toBe('allow')
    expect(of(parentWith({ decision: 'reject', bound: 'lineage' }))).toBe('reject')
    expect(of(parentWith({ decision: 'reject', bound: 'unsaid' }))).toBeUndefined()
    expect(of(parentWith())).toBeUndefined()
  })
})
