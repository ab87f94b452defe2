/**
 * Verdict sources (what `@dsh/hooks`' PreToolUse hooks are to the broker): consulted inside
 * the broker's decision, before anyone is asked. A source's deny refuses, its ask is put to
 * the front-end, its allow widens nothing; the calls it takes travel to children as an
 * `askUp` level, and a tree a parent elsewhere delegated asks up for them even where its
 * rules allow them, refusing them when nobody is there to ask up.
 */
import { afterEach, describe, expect, it } from 'vitest'
import type { Agent } from '@dsh/agent'
import { ApprovalService, type ApprovalRequestInfo, type ApprovalVerdictSource, type SourceVerdict } from '@dsh/approvals'
import type { PermissionLevel } from '@dsh/base'
import { createDelegationHarness, type DelegationHarness } from '@dsh/testkit/delegation'

let harness: DelegationHarness | undefined
afterEach(async () => {
  await harness?.dispose()
  harness = undefined
})

/** A broker, a side-effecting `run` tool that records what it ran, and a source whose verdict `said` picks. */
async function broker(config: Partial<ApprovalService.Config>, said: (command: string) => SourceVerdict | undefined, takes = (tool: string) => tool === 'run') {
  harness = await createDelegationHarness({ sessionDir: false })
  await harness.plugin(ApprovalService, config)
  const ran: string[] = []
  const seen: ApprovalRequestInfo[] = []
  harness.ctx.tools.register({
    name: 'run',
    description: 'runs a command',
    parameters: { type: 'object', properties: { command: { type: 'string' } }, required: ['command'] },
    sideEffecting: true,
    execute: (args: { command: string }) => {
      ran.push(args.command)
      return `ran ${args.command}`
    },
  })
  const source: ApprovalVerdictSource = {
    name: 'a test source',
    askUp: ['run'],
    takes,
    verdict: (request) => {
      seen.push(request)
      return said((request.args as { command: string }).command)
    },
  }
  harness.ctx.approvals.addVerdictSource(source)
  return { ctx: harness.ctx, ran, seen }
}

const call = (agent: Agent, command: string) => harness!.ctx.tools.execute({ type: 'tool-call', id: `call-${command}`, name: 'run', args: { command } }, { signal: new AbortController().signal, callId: `call-${command}`, agent })

/** A front-end that answers `answer` and counts what it was asked. */
function frontEnd(answer: 'allow-once' | 'reject', asked: ApprovalRequestInfo[]) {
  return { name: 'the test user', ask: async (request: ApprovalRequestInfo) => (asked.push(request), answer === 'reject' ? { decision: 'reject' as const, by: 'the test user', reason: 'no' } : { decision: answer, by: 'the test user' }) }
}

describe('a verdict source inside the broker', () => {
  it('its deny refuses before the front-end is asked, with its reason; a call it does not take never reaches it', async () => {
    const { ctx, ran, seen } = await broker({ default: 'allow' }, (command) => (command.includes('rm -rf') ? { verdict: 'deny', by: 'the guard', reason: 'no rm -rf here' } : undefined))
    const asked: ApprovalRequestInfo[] = []
    ctx.approvals.addFrontEnd(frontEnd('allow-once', asked))
    const root = await ctx.agents.create({})
    const refused = await call(root, 'rm -rf build')
    expect(refused.permission).toMatchObject({ decision: 'reject', by: 'the guard', reason: 'no rm -rf here', source: 'rule' })
    expect(asked).toEqual([])
    expect((await call(root, 'ls')).permission).toMatchObject({ decision: 'allow-once', by: 'the test user' })
    expect(ran).toEqual(['ls'])
    expect(seen.map((request) => request.tool)).toEqual(['run', 'run'])
  })

  it('its ask is put to the front-end even where a rule allows the call, saying who asks; with nobody to ask it is refused', async () => {
    const { ctx, ran } = await broker({ allow: ['run'] }, () => ({ verdict: 'ask', by: 'the guard', reason: 'check this one' }))
    const root = await ctx.agents.create({})
    const unasked = await call(root, 'deploy')
    expect(unasked.permission).toMatchObject({ decision: 'reject', source: 'default' })
    expect(unasked.permission.decision === 'reject' && unasked.permission.reason).toContain('the guard (check this one) asks about it')
    const asked: ApprovalRequestInfo[] = []
    ctx.approvals.addFrontEnd(frontEnd('allow-once', asked))
    expect((await call(root, 'deploy')).permission).toMatchObject({ decision: 'allow-once', by: 'the test user' })
    expect(asked).toEqual([expect.objectContaining({ policy: 'ask', rule: 'the guard (check this one)' })])
    expect(ran).toEqual(['deploy'])
  })

  it('its allow widens nothing: a deny rule still denies, and with a reject default nobody-to-ask still refuses', async () => {
    const { ctx, ran } = await broker({ deny: ['run(rm *)'] }, () => ({ verdict: 'allow', by: 'the guard' }))
    const root = await ctx.agents.create({})
    expect((await call(root, 'rm x')).permission).toMatchObject({ decision: 'reject', source: 'rule', rule: 'run(rm *) (config)' })
    expect((await call(root, 'ls')).permission).toMatchObject({ decision: 'reject', source: 'default' })
    expect(ran).toEqual([])
  })

  it('a source that throws denies, saying so', async () => {
    const { ctx, ran } = await broker({ default: 'allow' }, () => {
      throw new Error('the guard broke')
    })
    const root = await ctx.agents.create({})
    const outcome = await call(root, 'ls')
    expect(outcome.permission.decision === 'reject' && outcome.permission.reason).toContain('the guard broke')
    expect(ran).toEqual([])
  })

  it('what it takes is an askUp level every child started here carries (ownLevels), beside the config rules', async () => {
    const { ctx } = await broker({ allow: ['ls'] }, () => undefined)
    expect(ctx.approvals.ownLevels).toEqual([{ from: 'config', allow: ['ls'] }, { from: expect.stringContaining('PreToolUse hooks'), askUp: ['run'] }])
  })
})

describe('askUp in a tree a parent elsewhere delegated', () => {
  /** A root of this process delegated by a parent elsewhere, with the levels its lineage carried. */
  const delegatedRoot = (ctx: DelegationHarness['ctx'], permissions: PermissionLevel[]) =>
    ctx.agents.create({ meta: { origin: 'acp', parentSession: 'the-parent', delegationDepth: 1, provider: 'acp', approvalDefault: 'allow', permissions } })

  it('a call the ancestors allow goes up to the front-end when their askUp names it, and an earlier "always" does not answer for it', async () => {
    harness = await createDelegationHarness({ sessionDir: false })
    await harness.plugin(ApprovalService, { default: 'allow' })
    const { ctx } = harness
    const ran: string[] = []
    ctx.tools.register({ name: 'run', description: 'runs', parameters: { type: 'object', properties: { command: { type: 'string' } } }, sideEffecting: true, execute: (args: { command: string }) => (ran.push(args.command), 'ok') })
    const root = await delegatedRoot(ctx, [{ from: 'config', allow: ['run'] }, { from: 'verdict sources (PreToolUse hooks)', askUp: ['Run'] }])
    // Nobody to ask up: refused, though the rules and the default allow it.
    const refused = await call(root, 'rm -rf x')
    expect(refused.permission.decision === 'reject' && refused.permission.reason).toContain('nobody is there to ask up the tree')
    const asked: ApprovalRequestInfo[] = []
    ctx.approvals.addFrontEnd({ name: 'the parent', ask: async (request) => (asked.push(request), { decision: 'allow-always', by: 'the parent' }) })
    await call(root, 'ls')
    await call(root, 'ls')
    expect(asked).toHaveLength(2)
    expect(ran).toEqual(['ls', 'ls'])
  })

  it('a tree rooted here is not bound by the askUp its own children carry', async () => {
    harness = await createDelegationHarness({ sessionDir: false })
    await harness.plugin(ApprovalService, { allow: ['run'] })
    const { ctx } = harness
    ctx.tools.register({ name: 'run', description: 'runs', parameters: { type: 'object', properties: { command: { type: 'string' } } }, sideEffecting: true, execute: () => 'ok' })
    const root = await ctx.agents.create({ meta: { permissions: [{ from: 'verdict sources (PreToolUse hooks)', askUp: ['run'] }] } })
    expect((await call(root, 'ls')).permission).toMatchObject({ decision: 'allow-once', source: 'rule' })
  })
})

describe('tools without side effects', () => {
  /** A broker with a default that rejects, a `lookup` tool without side effects, and a source that takes `takes`. */
  async function lookups(said: (query: string) => SourceVerdict | undefined, takes: (tool: string) => boolean) {
    harness = await createDelegationHarness({ sessionDir: false })
    await harness.plugin(ApprovalService, { default: 'reject' })
    const { ctx } = harness
    const looked: string[] = []
    const seen: string[] = []
    ctx.tools.register({ name: 'lookup', description: 'reads', parameters: { type: 'object', properties: { query: { type: 'string' } } }, execute: (args: { query: string }) => (looked.push(args.query), 'found') })
    ctx.approvals.addVerdictSource({ name: 'a test source', askUp: ['lookup'], takes: (tool) => (seen.push(tool), takes(tool)), verdict: (request) => said((request.args as { query: string }).query) })
    const root = await ctx.agents.create({})
    const look = (query: string) => ctx.tools.execute({ type: 'tool-call', id: `call-${query}`, name: 'lookup', args: { query } }, { signal: new AbortController().signal, callId: `call-${query}`, agent: root })
    return { ctx, looked, seen, look }
  }

  it('a call a source takes goes to it: its deny refuses; no objection runs it, whatever the default, and a gate that did not ask for it is not asked', async () => {
    const { ctx, looked, look } = await lookups((query) => (query === 'secret' ? { verdict: 'deny', by: 'the guard', reason: 'not that one' } : undefined), (tool) => tool === 'lookup')
    ctx.tools.addPermissionGate(() => ({ decision: 'reject', by: 'a gate for side effects only', reason: 'never asked about lookups' }))
    const refused = await look('secret')
    expect(refused.result.isError).toBe(true)
    expect(refused.permission).toMatchObject({ decision: 'reject', by: 'the guard', reason: 'not that one' })
    expect((await look('readme')).result.isError).not.toBe(true)
    expect(looked).toEqual(['readme'])
  })

  it('a call no source takes is never put to the gates: no permission is recorded and the default does not apply', async () => {
    const { looked, look, seen } = await lookups(() => ({ verdict: 'deny', by: 'the guard' }), () => false)
    const outcome = await look('readme')
    expect(outcome.permission).toBeUndefined()
    expect(looked).toEqual(['readme'])
    expect(seen).toEqual(['lookup'])
  })

  it("a source's ask is put to the front-end, and refused with nobody to ask", async () => {
    const { ctx, looked, look } = await lookups(() => ({ verdict: 'ask', by: 'the guard' }), () => true)
    expect((await look('first')).permission).toMatchObject({ decision: 'reject' })
    ctx.approvals.addFrontEnd({ name: 'the test user', ask: async () => ({ decision: 'allow-once', by: 'the test user' }) })
    expect((await look('second')).permission).toMatchObject({ decision: 'allow-once', by: 'the test user' })
    expect(looked).toEqual(['second'])
  })
})

describe('read-only calls in a tree a parent elsewhere delegated', () => {
  it('a call its askUp names goes up to the front-end, said to be without side effects; nobody to ask refuses it; a tool it does not name is put to no gate', async () => {
    harness = await createDelegationHarness({ sessionDir: false })
    await harness.plugin(ApprovalService, { default: 'allow' })
    const { ctx } = harness
    const looked: string[] = []
    for (const name of ['lookup', 'other']) ctx.tools.register({ name, description: 'reads', parameters: { type: 'object', properties: { query: { type: 'string' } } }, execute: (args: { query: string }) => (looked.push(`${name} ${args.query}`), 'found') })
    const root = await ctx.agents.create({ meta: { origin: 'acp', parentSession: 'the-parent', delegationDepth: 1, provider: 'acp', approvalDefault: 'allow', permissions: [{ from: 'verdict sources (PreToolUse hooks)', askUp: ['Lookup'] }] } })
    const use = (name: string, query: string) => ctx.tools.execute({ type: 'tool-call', id: `call-${name}-${query}`, name, args: { query } }, { signal: new AbortController().signal, callId: `call-${query}`, agent: root })
    const refused = await use('lookup', 'first')
    expect(refused.permission.decision === 'reject' && refused.permission.reason).toContain('nobody is there to ask up the tree')
    const asked: ApprovalRequestInfo[] = []
    ctx.approvals.addFrontEnd({ name: 'the parent', ask: async (request) => (asked.push(request), { decision: 'reject', by: 'the parent', reason: 'its hook refused it' }) })
    expect((await use('lookup', 'second')).permission).toMatchObject({ decision: 'reject', by: 'the parent' })
    expect(asked).toEqual([expect.objectContaining({ tool: 'lookup', sideEffect: false })])
    expect((await use('other', 'third')).permission).toBeUndefined()
    expect(looked).toEqual(['other third'])
  })
})
