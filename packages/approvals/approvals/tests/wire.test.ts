/**
 * The approval wire (`wire.ts`): what one dsh process tells another about a side effect.
 * Each codec round-trips, and each field a peer can get wrong is refused (the request) or
 * left out (the provenance), never thrown.
 */
import { describe, expect, it } from 'vitest'
import type { PermissionDecision } from '@dsh/base'
import {
  decodeForwarded,
  decodeIdentified,
  decodeProvenance,
  encodeForwarded,
  isAnswerDecision,
  parsePermissionPolicy,
  provenanceMeta,
  type ApprovalRequestInfo,
  type WireRead,
} from '@dsh/approvals'

const request = (more: Partial<ApprovalRequestInfo> = {}): ApprovalRequestInfo => ({
  id: 'approval-1',
  path: ['dsh', 'spawn "survey"', 'spawn "check"'],
  chain: ['a1', 'a2', 'a3'],
  agentId: 'a3',
  tool: 'bash',
  subject: 'rm -rf build',
  display: 'rm -rf build',
  kind: 'execute',
  args: { command: 'rm -rf build' },
  policy: 'ask',
  rule: 'bash(rm *)',
  startedAt: 1,
  expiresAt: 2,
  ...more,
})

const good = { below: ['spawn "check"'], tool: 'bash', subject: 'rm -rf build', kind: 'execute', policy: 'ask' }

function problemOf<T>(read: WireRead<T>): string {
  if (read.ok) throw new Error(`expected a refusal, got ${JSON.stringify(read.value)}`)
  return read.problem
}

describe('the forwarded request', () => {
  it('round-trips: what one side encodes the other decodes to the same request, the path below the forwarding agent', () => {
    const encoded = encodeForwarded(request())
    expect(encoded).toEqual({ below: ['spawn "survey"', 'spawn "check"'], tool: 'bash', subject: 'rm -rf build', kind: 'execute', policy: 'ask' })
    // Through JSON, as every transport carries it.
    expect(decodeForwarded(JSON.parse(JSON.stringify(encoded)))).toEqual({ ok: true, value: encoded })
  })

  it('a request no rule asked about carries no policy, and one without a kind (an older peer) reads as other', () => {
    const encoded = encodeForwarded(request({ policy: 'none', path: ['dsh'] }))
    expect(encoded).toEqual({ below: [], tool: 'bash', subject: 'rm -rf build', kind: 'execute' })
    expect(decodeForwarded({ below: [], tool: 'bash', subject: 'x' })).toEqual({ ok: true, value: { below: [], tool: 'bash', subject: 'x', kind: 'other' } })
  })

  it('each malformed field refuses the request, naming the field', () => {
    const cases: [unknown, RegExp][] = [
      ['not an object', /the request is not an object/],
      [null, /the request is not an object/],
      [{ ...good, below: 'spawn' }, /"below" must be a list/],
      [{ ...good, below: Array.from({ length: 33 }, () => 'x') }, /"below" must be a list of at most 32/],
      [{ ...good, below: [7] }, /"below" must hold names/],
      [{ ...good, below: ['x'.repeat(201)] }, /"below" must hold names of at most 200/],
      [{ ...good, tool: undefined }, /"tool" must be a tool name .*got nothing/],
      [{ ...good, tool: 'rm -rf /' }, /"tool" must be a tool name/],
      [{ ...good, tool: 'x'.repeat(65) }, /"tool" must be a tool name/],
      [{ ...good, subject: 5 }, /"subject" must be text/],
      [{ ...good, subject: 'x'.repeat(16_385) }, /"subject" must be text of at most 16384/],
      [{ ...good, kind: 'teleport' }, /"kind" must be one of execute, edit, other \(got "teleport"\)/],
      [{ ...good, policy: 'allow' }, /"policy" must be "ask" or absent \(got "allow"\)/],
    ]
    for (const [value, problem] of cases) expect(problemOf(decodeForwarded(value)), JSON.stringify(value)?.slice(0, 60)).toMatch(problem)
  })

  it('a value that cannot be printed (a cycle, no prototype) is refused, never thrown', () => {
    const cycle: Record<string, unknown> = {}
    cycle.self = cycle
    expect(problemOf(decodeForwarded({ ...good, tool: cycle }))).toMatch(/"tool" must be a tool name \(.*\) \(got \[object Object\]\)/)
    expect(problemOf(decodeForwarded({ ...good, kind: Object.create(null) }))).toMatch(/"kind" must be one of/)
    expect(problemOf(decodeForwarded({ ...good, subject: 10n }))).toMatch(/"subject" must be text .*\(got 10\)/)
  })

  it('with an id (A2A): round-trips, and a missing, empty or long id refuses it', () => {
    expect(decodeIdentified({ id: 'approval-7', ...good })).toEqual({ ok: true, value: { id: 'approval-7', ...good } })
    for (const id of [undefined, '', 7, 'x'.repeat(201)]) expect(problemOf(decodeIdentified({ ...good, id }))).toMatch(/"id" must be a non-empty string/)
    expect(problemOf(decodeIdentified({ id: 'approval-7', ...good, policy: 'allow' }))).toMatch(/"policy"/)
  })
})

describe("a decision's provenance", () => {
  const decided: PermissionDecision = { decision: 'reject', by: 'the user at the terminal', source: 'rule', rule: 'bash(rm *)', at: 1_700_000_000_000, reason: 'not that' }

  it('round-trips, naming the hop it came through once however many it came down', () => {
    const meta = JSON.parse(JSON.stringify(provenanceMeta(decided))) as unknown
    expect(meta).toEqual({ dsh: { decision: { by: 'the user at the terminal', source: 'rule', rule: 'bash(rm *)', at: 1_700_000_000_000, reason: 'not that' } } })
    const once = decodeProvenance(meta, 'the ACP client')
    expect(once).toEqual({ by: 'the user at the terminal (through the ACP client)', source: 'rule', rule: 'bash(rm *)', at: 1_700_000_000_000, reason: 'not that' })
    const twice = decodeProvenance(provenanceMeta({ ...decided, by: once.by! }), 'the ACP client')
    expect(twice.by).toBe('the user at the terminal (through the ACP client)')
  })

  it('an allowing decision carries no reason, and leaves out what it does not have', () => {
    expect(provenanceMeta({ decision: 'allow-once', by: 'the user' })).toEqual({ dsh: { decision: { by: 'the user' } } })
  })

  it('each malformed field is left out and the rest kept; no provenance at all reads as none', () => {
    const meta = (decision: Record<string, unknown>) => ({ dsh: { decision: { by: 'x', source: 'user', rule: 'r', at: 5, reason: 'why', ...decision } } })
    const hop = 'the A2A caller'
    expect(decodeProvenance(meta({ by: 7 }), hop)).toEqual({ source: 'user', rule: 'r', at: 5, reason: 'why' })
    expect(decodeProvenance(meta({ by: '' }), hop)).not.toHaveProperty('by')
    expect(decodeProvenance(meta({ source: 'the moon' }), hop)).toEqual({ by: 'x (through the A2A caller)', rule: 'r', at: 5, reason: 'why' })
    expect(decodeProvenance(meta({ rule: ['r'] }), hop)).not.toHaveProperty('rule')
    for (const at of ['5', 1.5, Number.MAX_SAFE_INTEGER + 2, Number.NaN]) expect(decodeProvenance(meta({ at }), hop)).not.toHaveProperty('at')
    expect(decodeProvenance(meta({ reason: {} }), hop)).not.toHaveProperty('reason')
    for (const none of [undefined, 'text', { dsh: 'x' }, { dsh: { decision: [1] } }, { other: 1 }]) expect(decodeProvenance(none, hop)).toEqual({})
  })

  it('long fields are bounded: by to 200 characters with the hop, the rule to 600, the reason to 500', () => {
    const read = decodeProvenance({ dsh: { decision: { by: 'b'.repeat(1000), rule: 'r'.repeat(1000), reason: 'w'.repeat(1000) } } }, 'the ACP client')
    expect(read.by).toBe(`${'b'.repeat(160)} (through the ACP client)`)
    expect(read.rule).toHaveLength(600)
    expect(read.reason).toHaveLength(500)
  })
})

describe('answers and policies', () => {
  it('the three decisions a person answers with, and nothing else', () => {
    for (const decision of ['allow-once', 'allow-always', 'reject']) expect(isAnswerDecision(decision)).toBe(true)
    for (const decision of ['allow', 'yes', '', undefined, 1, { decision: 'reject' }]) expect(isAnswerDecision(decision)).toBe(false)
  })

  it('a policy is ask, allow or reject; anything else is the one refusal, quoted as typed or printed as passed', () => {
    for (const policy of ['ask', 'allow', 'reject']) expect(parsePermissionPolicy(policy)).toEqual({ ok: true, value: policy })
    expect(problemOf(parsePermissionPolicy('sometimes'))).toBe('must be one of ask, allow, reject (got "sometimes")')
    expect(problemOf(parsePermissionPolicy('sometimes', false))).toBe('must be one of ask, allow, reject (got sometimes)')
    expect(problemOf(parsePermissionPolicy(undefined))).toBe('must be one of ask, allow, reject (got "undefined")')
    expect(problemOf(parsePermissionPolicy(Object.create(null), false))).toBe('must be one of ask, allow, reject (got [object Object])')
    expect(problemOf(parsePermissionPolicy('ASK'))).toMatch(/got "ASK"/)
  })
})

describe('a forwarded read-only call', () => {
  it('carries sideEffect: false, and anything else there is refused naming the field', () => {
    expect(decodeForwarded({ below: [], tool: 'read', subject: 'a.txt', kind: 'other', sideEffect: false })).toEqual({ ok: true, value: { below: [], tool: 'read', subject: 'a.txt', kind: 'other', sideEffect: false } })
    const bad = decodeForwarded({ below: [], tool: 'read', subject: 'a.txt', sideEffect: true })
    expect(bad.ok === false && bad.problem).toContain('"sideEffect" must be false or absent')
  })
})
