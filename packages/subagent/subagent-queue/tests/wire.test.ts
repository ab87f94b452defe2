import { describe, expect, it } from 'vitest'
import { describeRedis, readRedisUrl } from '../src/redis.js'
import { jobIdOf } from '../src/transport.js'
import { HELPER_JOB_VERSION, holdersOf, MCP_JOB_VERSION, jobHelperOf, jobPayload, MAX_PERSONA_CHARS, MAX_PROMPT_CHARS, MAX_TOOL_NAMES, readJobDescendants, readJobPayload, readJobProgress, readJobResult, takenLogLine, WIRE_VERSION } from '../src/wire.js'

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
    expect(() => readJobPayload({ v: 4, prompt: 'x' })).toThrow(/wire version 4, this worker reads versions 1, 2 and 3/)
    expect(() => readJobPayload({ v: WIRE_VERSION })).toThrow(/no prompt text/)
    expect(() => readJobPayload({ v: WIRE_VERSION, prompt: 'x'.repeat(MAX_PROMPT_CHARS + 1) })).toThrow(/more than a worker accepts/)
    expect(() => readJobPayload({ v: WIRE_VERSION, prompt: 'x', lineage: 'p1' })).toThrow(/lineage is not an object/)
  })

  it("a helper's definition travels in a job of version 2, and a plain job stays version 1 (so a worker of the version before still takes it)", () => {
    const lineage = { parentSession: 'p1', delegationDepth: 1, provider: 'queue' }
    expect(jobPayload('x', lineage).v).toBe(WIRE_VERSION)
    expect(jobPayload('x', lineage, undefined)).not.toHaveProperty('helper')
    const helper = jobHelperOf({
      helper: { name: 'reviewer', hash: '0123abcd0123abcd' },
      persona: 'You review.',
      toolFilter: { allow: ['read', 'grep'], deny: ['bash'] },
      agentOptions: { model: 'scripted:/tmp/a path/reviewer.yml' },
    })
    expect(helper).toEqual({ name: 'reviewer', hash: '0123abcd0123abcd', persona: 'You review.', tools: { allow: ['read', 'grep'], deny: ['bash'] }, model: 'scripted:/tmp/a path/reviewer.yml' })
    const payload = jobPayload('review it', lineage, helper)
    expect(payload.v).toBe(HELPER_JOB_VERSION)
    expect(readJobPayload(JSON.parse(JSON.stringify(payload)))).toEqual(payload)
    // A request that says nothing of how the child is made carries no helper at all.
    expect(jobHelperOf({})).toBeUndefined()
    expect(jobHelperOf({ agentOptions: {} })).toBeUndefined()
    expect(jobHelperOf({ toolFilter: { deny: ['bash'] } })).toEqual({ tools: { deny: ['bash'] } })
  })

  it('a helper a worker cannot read exactly is refused, never run with part of it ignored', () => {
    const job = (helper: unknown, v = HELPER_JOB_VERSION) => ({ v, prompt: 'x', lineage: {}, helper })
    expect(() => readJobPayload(job({ persona: 'p' }, WIRE_VERSION))).toThrow(/a job of wire version 1 carries no helper/)
    expect(() => readJobPayload(job(undefined))).toThrow(/helper is not an object/)
    expect(() => readJobPayload(job({ persona: 'p', outputSchema: {} }))).toThrow(/helper has field\(s\) this worker does not know \("outputSchema"\)/)
    expect(() => readJobPayload(job({ name: 'reviewer' }))).toThrow(/helper\.hash is not a definition hash/)
    expect(() => readJobPayload(job({ name: '../etc', hash: 'ab' }))).toThrow(/helper\.name is not a helper name/)
    expect(() => readJobPayload(job({ persona: '' }))).toThrow(/helper\.persona is not text/)
    expect(() => readJobPayload(job({ persona: 'p'.repeat(MAX_PERSONA_CHARS + 1) }))).toThrow(/more than a worker accepts/)
    expect(() => readJobPayload(job({ tools: {} }))).toThrow(/helper\.tools must be \{ allow\?, deny\? \}/)
    expect(() => readJobPayload(job({ tools: { allow: ['read'], also: ['x'] } }))).toThrow(/helper\.tools must be/)
    expect(() => readJobPayload(job({ tools: { allow: 'read' } }))).toThrow(/tools\.allow is not a list/)
    expect(() => readJobPayload(job({ tools: { deny: ['rm -rf'] } }))).toThrow(/tools\.deny is not a list/)
    expect(() => readJobPayload(job({ tools: { deny: ['mcp__*x'] } }))).toThrow(/tools\.deny is not a list/)
    expect(() => readJobPayload(job({ tools: { allow: Array.from({ length: MAX_TOOL_NAMES + 1 }, (_, i) => `t${i}`) } }))).toThrow(/at most 256 tool names/)
    expect(() => readJobPayload(job({ model: 7 }))).toThrow(/helper\.model is not a model spec/)
    expect(() => readJobPayload(job({ model: 'scripted:a\u001b[2Jb' }))).toThrow(/helper\.model is not a model spec/)
    expect(() => readJobPayload(job({ model: ':no-adapter' }))).toThrow(/helper\.model is not a model spec/)
    // An empty helper says nothing, and is read as such.
    expect(readJobPayload(job({})).helper).toEqual({})
  })

  it("a helper's MCP servers travel as names in a job of version 3, and its deny patterns unexpanded; a command, a bad name or a version that does not say them is refused", () => {
    const lineage = { parentSession: 'p1', delegationDepth: 1, provider: 'queue' }
    const helper = jobHelperOf({ helper: { name: 'docs', hash: 'ab12' }, toolFilter: { deny: ['mcp__other__*'] }, mcpServers: ['files', 'git-hub'] })
    expect(helper).toEqual({ name: 'docs', hash: 'ab12', tools: { deny: ['mcp__other__*'] }, mcpServers: ['files', 'git-hub'] })
    const payload = jobPayload('read it', lineage, helper)
    expect(payload.v).toBe(MCP_JOB_VERSION)
    expect(readJobPayload(JSON.parse(JSON.stringify(payload)))).toEqual(payload)
    // Servers alone make a helper; no servers, no version 3.
    expect(jobPayload('x', lineage, jobHelperOf({ mcpServers: ['files'] })).v).toBe(MCP_JOB_VERSION)
    expect(jobHelperOf({ mcpServers: [] })).toBeUndefined()
    const job = (helper: unknown, v: number) => ({ v, prompt: 'x', lineage: {}, helper })
    expect(() => readJobPayload(job({ mcpServers: ['files'] }, HELPER_JOB_VERSION))).toThrow(/names MCP servers is of wire version 3, and only such a job is/)
    expect(() => readJobPayload(job({ persona: 'p' }, MCP_JOB_VERSION))).toThrow(/names MCP servers is of wire version 3, and only such a job is/)
    expect(() => readJobPayload(job({ mcpServers: [{ files: { command: 'sh' } }] }, MCP_JOB_VERSION))).toThrow(/helper\.mcpServers is not a list of 1 to 64 MCP server names \(never a server's command/)
    expect(() => readJobPayload(job({ mcpServers: 'files' }, MCP_JOB_VERSION))).toThrow(/helper\.mcpServers is not a list/)
    expect(() => readJobPayload(job({ mcpServers: ['a__b'] }, MCP_JOB_VERSION))).toThrow(/helper\.mcpServers is not a list/)
    expect(() => readJobPayload(job({ mcpServers: [] }, MCP_JOB_VERSION))).toThrow(/helper\.mcpServers is not a list/)
  })

  it('the workers that took a job are read back from its log, in order, other lines skipped', () => {
    const lines = [takenLogLine('host-a:101', 1), 'something else', takenLogLine('host-b:202', 2), 7, 'taken by h\u001b]0;x:3 (try 3)']
    expect(holdersOf(lines)).toEqual([
      { worker: 'host-a:101', attempt: 1 },
      { worker: 'host-b:202', attempt: 2 },
      { worker: 'h\\x1b]0;x:3', attempt: 3 },
    ])
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

  it("a progress report's descendants are read when well-formed, each malformed one dropped with a reason, the rest kept", () => {
    const dropped: string[] = []
    const good = { event: 'end', id: 'a1', path: ['spawn "grand"'], stopReason: 'completed' }
    const read = readJobDescendants({ v: WIRE_VERSION, updates: [], descendants: [good, { event: 'exploded', id: 'a2', path: ['x'] }, { event: 'start', id: 'a3', path: [] }, { ...good, id: 'a4', path: ['spawn', 7] }] }, (reason) => dropped.push(reason))
    expect(read).toEqual([good])
    expect(dropped).toHaveLength(3)
    expect(dropped[0]).toMatch(/^a progress report descendants entry that is not \{ event: start\|end, id, path/)
    expect(readJobDescendants({ v: WIRE_VERSION, updates: [], descendants: 'a1' }, (reason) => dropped.push(reason))).toEqual([])
    expect(dropped.at(-1)).toBe('a progress report whose descendants is not a list')
    // A report of another version, or none, names no descendants.
    expect(readJobDescendants({ v: 9, updates: [], descendants: [good] }, (reason) => dropped.push(reason))).toEqual([])
    expect(readJobDescendants({ v: WIRE_VERSION, updates: [] }, (reason) => dropped.push(reason))).toEqual([])
    expect(dropped).toHaveLength(4)
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
