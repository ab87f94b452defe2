import { describe, expect, it } from 'vitest'
import { jobIdOf, jobPayload, MAX_PROMPT_CHARS, readJobPayload, readJobProgress, readJobResult, readRedisUrl, describeRedis, WIRE_VERSION } from '@dsh/subagent-queue'

describe('what crosses the queue', () => {
  it('a job id comes from the parent session, the tool call and the prompt, so the same call always names the same job', () => {
    const id = jobIdOf({ parentSession: 'p1', toolCallId: 'call_1' }, 'review it')
    expect(id).toMatch(/^p1\.call_1\.[0-9a-f]{12}$/)
    expect(jobIdOf({ parentSession: 'p1', toolCallId: 'call_1' }, 'review it')).toBe(id)
    // A later call reusing the call id with another prompt is another job.
    expect(jobIdOf({ parentSession: 'p1', toolCallId: 'call_1' }, 'test it')).not.toBe(id)
    // A tool call id with characters Redis keys should not carry is hashed, still stably.
    const odd = jobIdOf({ parentSession: 'p1', toolCallId: 'call:1/../x' }, 'review it')
    expect(odd).toMatch(/^p1\.[0-9a-f]{32}\.[0-9a-f]{12}$/)
    expect(jobIdOf({ parentSession: 'p1', toolCallId: 'call:1/../x' }, 'review it')).toBe(odd)
    // Without a tool call there is nothing to name it by: every delegation is a new job.
    expect(jobIdOf({ parentSession: 'p1' }, 'x')).not.toBe(jobIdOf({ parentSession: 'p1' }, 'x'))
  })

  it('a job payload carries the prompt and the lineage, and nothing that is not ours is read as one', () => {
    const payload = jobPayload('review it', { parentSession: 'p1', delegationDepth: 1, provider: 'queue', label: 'review', maxDepth: 3, toolCallId: 'call_1' })
    expect(readJobPayload(JSON.parse(JSON.stringify(payload)))).toEqual(payload)
    expect(() => readJobPayload('text')).toThrow(/not an object/)
    expect(() => readJobPayload({ v: 2, prompt: 'x' })).toThrow(/wire version 2, this worker reads version 1/)
    expect(() => readJobPayload({ v: WIRE_VERSION })).toThrow(/no prompt text/)
    expect(() => readJobPayload({ v: WIRE_VERSION, prompt: 'x'.repeat(MAX_PROMPT_CHARS + 1) })).toThrow(/more than a worker accepts/)
    expect(() => readJobPayload({ v: WIRE_VERSION, prompt: 'x', lineage: 'p1' })).toThrow(/lineage is not an object/)
  })

  it("a worker's result is validated: garbage is a clear error, usage that is not counts is dropped", () => {
    const good = { v: 1, output: 'done', stopReason: 'completed', session: 's1', worker: 'h:1', usage: { inputTokens: 3, outputTokens: 2, cachedInputTokens: 0 } }
    expect(readJobResult(JSON.stringify(good))).toEqual(good)
    expect(readJobResult({ ...good, usage: { inputTokens: -1 } }).usage).toBeUndefined()
    expect(() => readJobResult('{nope')).toThrow(/not JSON/)
    expect(() => readJobResult({ ...good, stopReason: 'exploded' })).toThrow(/unknown stop reason "exploded"/)
    expect(() => readJobResult({ ...good, output: 7 })).toThrow(/output is not text/)
    expect(() => readJobResult({ ...good, session: undefined })).toThrow(/which session and worker/)
    expect(readJobProgress({ v: 1, updates: [{ kind: 'text', text: 'a' }, 'junk'] })).toEqual([{ kind: 'text', text: 'a' }])
    expect(readJobProgress({ v: 9, updates: [] })).toEqual([])
  })

  it('the Redis URL comes from a named variable, is checked, and is shown without its password', () => {
    expect(() => readRedisUrl('R', {})).toThrow(/R is not set/)
    expect(() => readRedisUrl('R', { R: 'localhost:6379' })).toThrow(/R holds a localhost: URL|R does not hold a URL/)
    expect(() => readRedisUrl('R', { R: 'http://h' })).toThrow(/R holds a http: URL/)
    expect(readRedisUrl('R', { R: 'redis://:s3cret@10.0.0.5:6379/2' })).toBe('redis://:s3cret@10.0.0.5:6379/2')
    expect(describeRedis('redis://:s3cret@10.0.0.5:6379/2')).toBe('redis://10.0.0.5:6379/2')
    expect(describeRedis('unix:///run/redis.sock')).toBe('unix:///run/redis.sock')
  })
})
