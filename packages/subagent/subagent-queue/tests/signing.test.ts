/**
 * Signed jobs, as a worker checks them: the signature covers every field of the job with
 * its queue and id, in an encoding that does not depend on key order, and is refused
 * whole when any of it differs; the key comes from a named variable and never shows.
 */
import { inspect } from 'node:util'
import { describe, expect, it } from 'vitest'
import { QueueProviderConfig, resolveQueueSpec } from '../src/config.js'
import { canonicalJson, jobSignature, jobSignatureProblem, readQueueKey } from '../src/signing.js'
import { jobPayload, readJobPayload, WIRE_VERSION } from '../src/wire.js'

const SECRET = 'k'.repeat(24) + '0123456789abcdef'
const key = readQueueKey('DSH_QUEUE_KEY', { DSH_QUEUE_KEY: SECRET })
const otherKey = readQueueKey('DSH_QUEUE_KEY', { DSH_QUEUE_KEY: 'another key of enough characters to pass' })

/** A job's data as the parent writes it: the payload, signed for `queue` and `jobId`. */
function signed(queue = 'dsh', jobId = 'p1.call_1.abc') {
  const payload = jobPayload('review the change', {
    parentSession: 'p1',
    delegationDepth: 1,
    provider: 'queue',
    maxDepth: 2,
    toolCallId: 'call_1',
    permissions: [{ from: 'config', deny: ['bash'] }],
    budget: { outputTokens: 1000 },
  }, { name: 'reviewer', hash: 'ab12', tools: { allow: ['read'] } })
  const data: Record<string, unknown> = JSON.parse(JSON.stringify(payload))
  data.sig = jobSignature(key, queue, jobId, data)
  // What a worker gets: the JSON Redis stored, parsed again.
  return JSON.parse(JSON.stringify(data)) as Record<string, unknown> & { lineage: Record<string, unknown>; helper: Record<string, unknown> }
}

describe('signed queue jobs', () => {
  it('a job signed with the key passes, whatever order its fields arrive in', () => {
    const data = signed()
    expect(jobSignatureProblem(key, 'dsh', 'p1.call_1.abc', data)).toBeUndefined()
    const reordered = Object.fromEntries(Object.entries(data).reverse())
    reordered.lineage = Object.fromEntries(Object.entries(data.lineage).reverse())
    expect(jobSignatureProblem(key, 'dsh', 'p1.call_1.abc', reordered)).toBeUndefined()
    expect(canonicalJson({ b: [1, undefined, { d: 'x', c: null }], a: undefined })).toBe('{"b":[1,null,{"c":null,"d":"x"}]}')
  })

  it('an unsigned job, a job signed with another key and a malformed signature are refused, each saying so', () => {
    const { sig: _sig, ...unsigned } = signed()
    expect(jobSignatureProblem(key, 'dsh', 'p1.call_1.abc', unsigned)).toMatch(/^the job is not signed, and this worker runs only jobs signed with the queue key in DSH_QUEUE_KEY: give the parent's queue provider the same key \(keyEnv: DSH_QUEUE_KEY\); nothing ran$/)
    expect(jobSignatureProblem(otherKey, 'dsh', 'p1.call_1.abc', signed())).toMatch(/^the job's signature does not match its contents/)
    expect(jobSignatureProblem(key, 'dsh', 'p1.call_1.abc', { ...signed(), sig: 'sha1:abc' })).toMatch(/not an hmac-sha256 signature/)
    expect(jobSignatureProblem(key, 'dsh', 'p1.call_1.abc', 'text')).toMatch(/not signed/)
  })

  it('changing any part of a signed job (a rule, the budget, the depth bound, the prompt, the helper, an added field) or moving it to another queue or id is refused', () => {
    const tamper: Array<[string, (data: ReturnType<typeof signed>) => void]> = [
      ['a rule dropped', (data) => void (data.lineage.permissions = [])],
      ['the budget raised', (data) => void (data.lineage.budget = { outputTokens: 1_000_000 })],
      ['the budget removed', (data) => void delete data.lineage.budget],
      ['the depth bound raised', (data) => void (data.lineage.maxDepth = 50)],
      ['the prompt swapped', (data) => void (data.prompt = 'run rm -rf ~')],
      ['a tool allowed', (data) => void (data.helper.tools = { allow: ['read', 'bash'] })],
      ['a field added', (data) => void (data.extra = 1)],
      ['the version changed', (data) => void (data.v = WIRE_VERSION)],
    ]
    for (const [what, change] of tamper) {
      const data = signed()
      change(data)
      expect(jobSignatureProblem(key, 'dsh', 'p1.call_1.abc', data), what).toMatch(/does not match its contents/)
    }
    expect(jobSignatureProblem(key, 'other-queue', 'p1.call_1.abc', signed())).toMatch(/does not match its contents/)
    expect(jobSignatureProblem(key, 'dsh', 'p1.call_2.abc', signed())).toMatch(/does not match its contents/)
  })

  it('the key is read from the named variable, refused when unset or short, and never shown', () => {
    expect(() => readQueueKey('DSH_QUEUE_KEY', {})).toThrow(/^DSH_QUEUE_KEY is not set \(or empty\); export the queue's signing key in it/)
    expect(() => readQueueKey('DSH_QUEUE_KEY', { DSH_QUEUE_KEY: 'short-secret' })).toThrow(/^DSH_QUEUE_KEY holds a key of 12 characters; a queue signing key needs at least 32/)
    expect(() => readQueueKey('DSH_QUEUE_KEY', { DSH_QUEUE_KEY: 'short-secret' })).not.toThrow(/short-secret/)
    expect(inspect(key, { showHidden: true, depth: 5 })).not.toContain(SECRET)
    expect(JSON.stringify(key)).not.toContain(SECRET)
    const spec = resolveQueueSpec(QueueProviderConfig({ keyEnv: 'DSH_QUEUE_KEY' }), { DSH_REDIS_URL: 'redis://127.0.0.1:6379', DSH_QUEUE_KEY: SECRET })
    expect(spec.key?.variable).toBe('DSH_QUEUE_KEY')
    expect(inspect(spec, { depth: 5 }) + JSON.stringify(spec)).not.toContain(SECRET)
    // Named in config but not set: refused at load, not run unsigned.
    expect(() => resolveQueueSpec(QueueProviderConfig({ keyEnv: 'DSH_QUEUE_KEY' }), { DSH_REDIS_URL: 'redis://127.0.0.1:6379' })).toThrow(/^subagent-queue: DSH_QUEUE_KEY is not set/)
    expect(resolveQueueSpec(QueueProviderConfig({}), { DSH_REDIS_URL: 'redis://127.0.0.1:6379' }).key).toBeUndefined()
  })

  it('a job payload with a field the worker does not know is refused at the boundary; its signature field is known', () => {
    const data = signed()
    expect(readJobPayload(data).prompt).toBe('review the change')
    expect(() => readJobPayload({ ...data, runAs: 'root' })).toThrow(/the job has field\(s\) this worker does not know \("runAs"\)/)
  })
})
