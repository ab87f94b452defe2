import { createHash } from 'node:crypto'
import { afterEach, describe, expect, it } from 'vitest'
import type { Agent } from '@dsh/agent'
import { ApprovalService, type ApprovalFrontEnd, type ApprovalRequestInfo } from '@dsh/approvals'
import type { PermissionDecision } from '@dsh/base'
import { createDelegationHarness, type DelegationHarness } from '@dsh/testkit/delegation'

let harness: DelegationHarness | undefined
afterEach(async () => {
  await harness?.dispose()
  harness = undefined
})

/** A harness with the broker and a side-effecting `run` tool that records what it ran. */
async function setup(config: Partial<ApprovalService.Config> = {}) {
  harness = await createDelegationHarness({ sessionDir: false })
  await harness.plugin(ApprovalService, config)
  const ran: string[] = []
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
  return { ctx: harness.ctx, ran, h: harness }
}

const call = (agent: Agent, command: string, signal = new AbortController().signal, id = `call-${command}`) =>
  harness!.ctx.tools.execute({ type: 'tool-call', id, name: 'run', args: { command } }, { signal, callId: id, agent })

async function child(parent: Agent, label: string, permissions?: { from: string; allow?: string[]; ask?: string[]; deny?: string[] }[]): Promise<Agent> {
  return harness!.ctx.agents.create({ parent, meta: { parentSession: parent.id, delegationDepth: parent.depth + 1, provider: 'spawn', label, origin: 'subagent', ...(permissions && { permissions }) } })
}

/** A front-end that answers each request with `answer(request)`, recording what it was asked. */
function scriptedFrontEnd(answer: (request: ApprovalRequestInfo) => PermissionDecision | Promise<PermissionDecision>, options: { oneAtATime?: boolean } = {}) {
  const asked: ApprovalRequestInfo[] = []
  const frontEnd: ApprovalFrontEnd = {
    name: 'the test user',
    ...options,
    ask: async (request) => {
      asked.push(request)
      return answer(request)
    },
  }
  return { frontEnd, asked }
}

describe('the approval broker', () => {
  it('with nobody to ask, a side effect no rule decides is rejected by default, and the decision says who and why', async () => {
    const { ctx, ran } = await setup()
    const root = await ctx.agents.create({ meta: { origin: 'cli' } })
    const outcome = await call(root, 'touch x')
    expect(ran).toEqual([])
    expect(outcome.permission).toMatchObject({ decision: 'reject', source: 'default', by: 'the default (nobody to ask)' })
    expect(outcome.result.isError).toBe(true)
  })

  it('asks the front-end naming the agent path; a rejected command is not run, "always" lets the same request through unasked for the rest of the tree', async () => {
    const { ctx, ran } = await setup()
    const root = await ctx.agents.create({ meta: { origin: 'cli' } })
    const reviewer = await child(root, 'review the diff')
    const { frontEnd, asked } = scriptedFrontEnd((request) =>
      request.subject === 'rm -rf build' ? { decision: 'reject', by: 'the test user', reason: 'no' } : { decision: 'allow-always', by: 'the test user' },
    )
    ctx.approvals.addFrontEnd(frontEnd)
    const rejected = await call(reviewer, 'rm -rf build')
    expect(rejected.permission).toMatchObject({ decision: 'reject', source: 'user' })
    expect(asked[0]).toMatchObject({ path: ['dsh', 'spawn "review the diff"'], tool: 'run', subject: 'rm -rf build', kind: 'execute', chain: [root.id, reviewer.id] })
    const first = await call(reviewer, 'npm test')
    const again = await call(reviewer, 'npm test', undefined, 'call-again')
    const fromRoot = await call(root, 'npm test', undefined, 'call-root')
    expect(ran).toEqual(['npm test', 'npm test', 'npm test'])
    expect(asked.map((request) => request.subject)).toEqual(['rm -rf build', 'npm test'])
    expect(first.permission).toMatchObject({ decision: 'allow-always', source: 'user' })
    expect(again.permission).toMatchObject({ decision: 'allow-always', source: 'remembered' })
    expect(fromRoot.permission).toMatchObject({ source: 'remembered' })
    // Another tree of the same process is not covered by this tree's answer.
    const otherRoot = await ctx.agents.create({ meta: { origin: 'cli' } })
    await call(otherRoot, 'npm test', undefined, 'call-other')
    expect(asked).toHaveLength(3)
  })

  it('rules decide before anyone is asked: a helper allowing only npm test lets it through unasked and asks for anything else; a parent denying bash denies it', async () => {
    const { ctx, ran } = await setup()
    const root = await ctx.agents.create({ meta: { origin: 'cli' } })
    const tester = await child(root, 'test', [{ from: 'helper tester', allow: ['run(npm test*)'] }])
    const { frontEnd, asked } = scriptedFrontEnd(() => ({ decision: 'reject', by: 'the test user', reason: 'no' }))
    ctx.approvals.addFrontEnd(frontEnd)
    const allowed = await call(tester, 'npm test -- --run a')
    expect(allowed.permission).toMatchObject({ decision: 'allow-once', source: 'rule', rule: 'run(npm test*) (helper tester)' })
    await call(tester, 'npm publish')
    expect(asked.map((request) => request.subject)).toEqual(['npm publish'])
    const denied = await child(root, 'test under a denying parent', [{ from: 'config', deny: ['run'] }, { from: 'helper tester', allow: ['run(npm test*)'] }])
    const refused = await call(denied, 'npm test', undefined, 'call-denied')
    expect(refused.permission).toMatchObject({ decision: 'reject', source: 'rule', rule: 'run (config)' })
    expect(ran).toEqual(['npm test -- --run a'])
    expect(asked).toHaveLength(1)
  })

  it("the process's own rules apply to every agent, and an ask rule with nobody to ask is a rejection whatever the default", async () => {
    const { ctx, ran } = await setup({ allow: ['run(ls*)'], ask: ['run(git push*)'] })
    ctx.approvals.setDefault('allow', 'dsh run --permission allow')
    const root = await ctx.agents.create({ meta: { origin: 'cli' } })
    expect((await call(root, 'ls -la')).permission).toMatchObject({ source: 'rule', rule: 'run(ls*) (config)' })
    expect((await call(root, 'git push')).permission).toMatchObject({ decision: 'reject', source: 'default', rule: 'run(git push*) (config)' })
    expect((await call(root, 'make')).permission).toMatchObject({ decision: 'allow-once', source: 'default', by: 'dsh run --permission allow' })
    expect(ran).toEqual(['ls -la', 'make'])
  })

  it('a request nobody answers is rejected after timeoutMs, says so, and the parent of the child that asked is told', async () => {
    const { ctx, ran } = await setup({ timeoutMs: 50 })
    const root = await ctx.agents.create({ meta: { origin: 'cli' } })
    const background = await child(root, 'background audit')
    ctx.approvals.addFrontEnd({ name: 'nobody', ask: (_request, signal) => new Promise((_resolve, reject) => signal.addEventListener('abort', () => reject(new Error('withdrawn')))) })
    const settled: string[] = []
    ctx.on('approval/settled', (info) => settled.push(info.decision.source ?? ''))
    const outcome = await call(background, 'npm test')
    expect(ran).toEqual([])
    expect(outcome.permission).toMatchObject({ decision: 'reject', source: 'timeout' })
    expect(outcome.result.content[0]).toMatchObject({ text: expect.stringContaining('nobody answered within 0 s') })
    expect(settled).toEqual(['timeout'])
    const notice = root.session.events().find((event) => event.type === 'input/queued')
    expect(notice).toMatchObject({ message: { content: [{ text: expect.stringContaining('spawn "background audit" asked to run run (npm test)') }] } })
  })

  it('cancelling the call rejects its pending request at once, and the front-end is told to stop asking', async () => {
    const { ctx, ran } = await setup()
    const root = await ctx.agents.create({ meta: { origin: 'cli' } })
    let withdrawn = false
    let entered!: () => void
    const asking = new Promise<void>((resolve) => (entered = resolve))
    ctx.approvals.addFrontEnd({
      name: 'slow',
      ask: (_request, signal) =>
        new Promise((_resolve, reject) => {
          entered()
          signal.addEventListener('abort', () => {
            withdrawn = true
            reject(new Error('withdrawn'))
          })
        }),
    })
    const cancel = new AbortController()
    const pending = call(root, 'npm test', cancel.signal)
    await asking
    expect(ctx.approvals.waitingUnder(root.id)).toHaveLength(1)
    cancel.abort()
    const outcome = await pending
    expect(outcome.permission).toMatchObject({ decision: 'reject', source: 'cancelled' })
    expect(withdrawn).toBe(true)
    expect(ctx.approvals.pending()).toEqual([])
    expect(ran).toEqual([])
  })

  it('a flood of 1,000 requests from one child is bounded, and another child is asked next, not after the flood', async () => {
    const { ctx, ran } = await setup({ maxPendingPerAgent: 8 })
    const root = await ctx.agents.create({ meta: { origin: 'cli' } })
    const flooder = await child(root, 'flooder')
    const other = await child(root, 'other')
    const order: string[] = []
    let release!: () => void
    const gate = new Promise<void>((resolve) => (release = resolve))
    const { frontEnd } = scriptedFrontEnd(
      async (request) => {
        order.push(request.path.at(-1)!)
        if (order.length === 1) await gate
        return { decision: 'reject', by: 'the test user', reason: 'no' }
      },
      { oneAtATime: true },
    )
    ctx.approvals.addFrontEnd(frontEnd)
    const flood = Array.from({ length: 1000 }, (_, index) => call(flooder, `cmd ${index}`, undefined, `flood-${index}`))
    await new Promise((resolve) => setTimeout(resolve, 10))
    const fromOther = call(other, 'npm test', undefined, 'other-call')
    await new Promise((resolve) => setTimeout(resolve, 10))
    release()
    const outcomes = await Promise.all(flood)
    await fromOther
    expect(outcomes.filter((outcome) => outcome.permission?.source === 'limit')).toHaveLength(992)
    expect(outcomes.filter((outcome) => outcome.permission?.source === 'user')).toHaveLength(8)
    // The other child's one request was the second on screen, not the ninth.
    expect(order.slice(0, 2)).toEqual(['spawn "flooder"', 'spawn "other"'])
    expect(ran).toEqual([])
  })

  it('an answer that is not a decision, or a front-end that fails, is a rejection saying so', async () => {
    const { ctx, ran } = await setup()
    const root = await ctx.agents.create({ meta: { origin: 'cli' } })
    const remove = ctx.approvals.addFrontEnd({ name: 'garbled', ask: async () => ({ decision: 'yes please' }) as unknown as PermissionDecision })
    expect((await call(root, 'a')).permission).toMatchObject({ decision: 'reject', reason: 'garbled gave an answer that is not a decision' })
    remove()
    ctx.approvals.addFrontEnd({ name: 'broken', ask: async () => { throw new Error('the terminal went away') } })
    expect((await call(root, 'b')).permission).toMatchObject({ decision: 'reject', reason: 'asking broken failed: the terminal went away' })
    expect(ran).toEqual([])
  })

  it("a remote child's request is asked with the path through it, under its helper's rules, and recorded in the delegating agent's session", async () => {
    const { ctx } = await setup()
    const root = await ctx.agents.create({ meta: { origin: 'cli' } })
    const { frontEnd, asked } = scriptedFrontEnd(() => ({ decision: 'allow-once', by: 'the test user' }))
    ctx.approvals.addFrontEnd(frontEnd)
    const decision = await ctx.approvals.request({
      agent: root,
      tool: 'bash',
      args: { command: 'cargo build' },
      signal: new AbortController().signal,
      remote: { child: 'codex:thread-1', name: 'codex "build it"', below: [], record: true },
    })
    expect(decision).toMatchObject({ decision: 'allow-once', source: 'user' })
    expect(asked[0]).toMatchObject({ path: ['dsh', 'codex "build it"'], chain: [root.id, 'codex:thread-1'], child: 'codex:thread-1' })
    const recorded = root.session.events().find((event) => event.type === 'approval')
    expect(recorded).toMatchObject({ request: { path: ['dsh', 'codex "build it"'], tool: 'bash', subject: 'cargo build', child: 'codex:thread-1' }, permission: { decision: 'allow-once', source: 'user' } })
    const denied = await ctx.approvals.request({
      agent: root,
      tool: 'bash',
      args: { command: 'cargo publish' },
      signal: new AbortController().signal,
      remote: { child: 'codex:thread-1', name: 'codex "build it"', levels: [{ from: 'helper builder', deny: ['bash(cargo publish*)'] }], record: true },
    })
    expect(denied).toMatchObject({ decision: 'reject', source: 'rule', rule: 'bash(cargo publish*) (helper builder)' })
    expect(asked).toHaveLength(1)
  })

  it('a remote dsh child that forwards what its own policy asks about is never decided more permissively here', async () => {
    const { ctx } = await setup({ allow: ['bash'] })
    const root = await ctx.agents.create({ meta: { origin: 'cli' } })
    const { frontEnd, asked } = scriptedFrontEnd(() => ({ decision: 'reject', by: 'the test user', reason: 'no' }))
    ctx.approvals.addFrontEnd(frontEnd)
    const decision = await ctx.approvals.request({
      agent: root,
      tool: 'bash',
      args: { command: 'git push' },
      signal: new AbortController().signal,
      remote: { child: 'acp:s1', name: 'acp "reviewer"', below: ['spawn "pusher"'], verdict: 'ask', record: false },
    })
    expect(decision).toMatchObject({ decision: 'reject', source: 'user' })
    expect(asked[0]?.path).toEqual(['dsh', 'acp "reviewer"', 'spawn "pusher"'])
    expect(root.session.events().some((event) => event.type === 'approval')).toBe(false)
  })

  it('an earlier "always" answers only the very same command, and never one a rule says to ask about every time', async () => {
    const { ctx, ran } = await setup({ ask: ['run(git push*)'] })
    const root = await ctx.agents.create({ meta: { origin: 'cli' } })
    const { frontEnd, asked } = scriptedFrontEnd(() => ({ decision: 'allow-always', by: 'the test user' }))
    ctx.approvals.addFrontEnd(frontEnd)
    const long = `make ${'x'.repeat(5000)}`
    await call(root, long, undefined, 'long-1')
    await call(root, `${long} && rm -rf ~`, undefined, 'long-2')
    await call(root, 'git push', undefined, 'push-1')
    await call(root, 'git push', undefined, 'push-2')
    expect(asked).toHaveLength(4)
    expect(asked[1]!.subject.endsWith('&& rm -rf ~')).toBe(true)
    expect(asked.slice(2).map((request) => request.subject)).toEqual(['git push', 'git push'])
    expect(ran).toHaveLength(4)
  })

  it('a remote child that invents names below it still shares one place in the line', async () => {
    const { ctx } = await setup({ maxPendingPerAgent: 2 })
    const root = await ctx.agents.create({ meta: { origin: 'cli' } })
    ctx.approvals.addFrontEnd({ name: 'nobody', ask: (_request, signal) => new Promise((_resolve, reject) => signal.addEventListener('abort', () => reject(new Error('withdrawn')))) })
    const stop = new AbortController()
    const asks = Array.from({ length: 6 }, (_, index) =>
      ctx.approvals.request({
        agent: root,
        tool: 'bash',
        args: { command: `cmd ${index}` },
        signal: stop.signal,
        remote: { child: 'acp:s1', name: 'acp "flooder"', below: [`invented ${index}`], record: false },
      }),
    )
    const early = await Promise.race([Promise.all(asks.slice(2)), new Promise((resolve) => setTimeout(() => resolve('still waiting'), 200))])
    expect(early).not.toBe('still waiting')
    expect((early as PermissionDecision[]).every((decision) => decision.source === 'limit')).toBe(true)
    stop.abort()
    await Promise.all(asks)
  })

  it('a recorder replays recorded decisions before anyone is asked, and hears every decision', async () => {
    const { ctx, ran } = await setup()
    const root = await ctx.agents.create({ meta: { origin: 'cli' } })
    const heard: string[] = []
    ctx.approvals.addRecorder({
      replay: (request) => (request.subject === 'npm test' ? { decision: 'allow-once', by: 'the user' } : undefined),
      record: (request, _session, decision) => heard.push(`${request.subject}: ${decision.decision}/${decision.source}`),
    })
    const { frontEnd, asked } = scriptedFrontEnd(() => ({ decision: 'reject', by: 'the test user', reason: 'no' }))
    ctx.approvals.addFrontEnd(frontEnd)
    await call(root, 'npm test')
    await call(root, 'make')
    expect(ran).toEqual(['npm test'])
    expect(asked.map((request) => request.subject)).toEqual(['make'])
    expect(heard).toEqual(['npm test: allow-once/replay', 'make: reject/user'])
  })

  it('a configured rule that is not a rule fails the start in one line', async () => {
    harness = await createDelegationHarness({ sessionDir: false })
    await expect(harness.ctx.plugin(ApprovalService, { allow: ['bash(npm test'] } as Partial<ApprovalService.Config>)).rejects.toThrow(/approvals.allow\[0\]: "bash\(npm test" is not a rule/)
  })
})

describe('answers given earlier or recorded answer only the very same request, whole', () => {
  const head = `echo ${'x'.repeat(300 * 1024)}`

  it('"always" for a command longer than the rules read does not answer another with the same first 256 KiB', async () => {
    const { ctx, ran } = await setup()
    const root = await ctx.agents.create({ meta: { origin: 'cli' } })
    const { frontEnd, asked } = scriptedFrontEnd((request) =>
      request.subject.endsWith(`sha256 ${digestOf(`${head} ok`)})`) ? { decision: 'allow-always', by: 'the test user' } : { decision: 'reject', by: 'the test user', reason: 'no' },
    )
    ctx.approvals.addFrontEnd(frontEnd)
    expect((await call(root, `${head} ok`, undefined, 'first')).permission).toMatchObject({ decision: 'allow-always', source: 'user' })
    expect((await call(root, `${head} ok`, undefined, 'again')).permission).toMatchObject({ decision: 'allow-always', source: 'remembered' })
    const other = await call(root, `${head}; rm -rf ~`, undefined, 'other')
    expect(other.permission).toMatchObject({ decision: 'reject', source: 'user' })
    expect(asked).toHaveLength(2)
    expect(ran).toEqual([`${head} ok`, `${head} ok`])
  })

  it('a recorded decision is replayed only for the request it was recorded for: not for another command of the same tool, nor one alike in what a front-end is shown', async () => {
    // Recorded: the front-end allowed `ls` and a long command.
    const recording: { tool: string; subject: string; decision: PermissionDecision }[] = []
    const long = `echo ${'y'.repeat(20_000)}`
    {
      const { ctx } = await setup()
      const root = await ctx.agents.create({ meta: { origin: 'cli' } })
      ctx.approvals.addRecorder({ record: (request, _session, decision) => recording.push({ tool: request.tool, subject: request.subject, decision }) })
      ctx.approvals.addFrontEnd(scriptedFrontEnd(() => ({ decision: 'allow-once', by: 'the test user' })).frontEnd)
      await call(root, 'ls')
      await call(root, `${long} a`)
      await harness!.dispose()
      harness = undefined
    }
    expect(recording.map((entry) => entry.decision.decision)).toEqual(['allow-once', 'allow-once'])
    // Replayed as a recording does: the first unused recorded decision of the same tool and subject.
    const { ctx, ran } = await setup()
    const root = await ctx.agents.create({ meta: { origin: 'cli' } })
    const used = new Set<number>()
    ctx.approvals.addRecorder({
      replay: (request) => {
        const index = recording.findIndex((entry, at) => !used.has(at) && entry.tool === request.tool && entry.subject === request.subject)
        if (index === -1) return undefined
        used.add(index)
        return recording[index]!.decision
      },
    })
    const { frontEnd, asked } = scriptedFrontEnd(() => ({ decision: 'reject', by: 'the test user', reason: 'not recorded' }))
    ctx.approvals.addFrontEnd(frontEnd)
    expect((await call(root, 'rm -rf ~')).permission).toMatchObject({ decision: 'reject', source: 'user' })
    expect((await call(root, `${long} b`)).permission).toMatchObject({ decision: 'reject', source: 'user' })
    expect((await call(root, 'ls')).permission).toMatchObject({ decision: 'allow-once', source: 'replay' })
    expect((await call(root, `${long} a`)).permission).toMatchObject({ decision: 'allow-once', source: 'replay' })
    expect(asked.map((request) => request.subject.slice(0, 12))).toEqual(['rm -rf ~', 'echo yyyyyyy'])
    expect(ran).toEqual(['ls', `${long} a`])
  })
})

function digestOf(text: string): string {
  return createHash('sha256').update(text).digest('hex')
}
