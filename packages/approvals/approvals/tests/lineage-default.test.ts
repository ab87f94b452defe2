/**
 * The default with nobody to ask, in a tree served for a parent in another process: this
 * process's allowing default never allows more than the default the tree's lineage carried
 * (`approvalDefault` in its root's header), and a lineage that carried none allows only what
 * its rules do. A tree rooted here, and a rejecting default, are unchanged.
 */
import { afterEach, describe, expect, it } from 'vitest'
import type { Agent } from '@dsh/agent'
import { ApprovalService } from '@dsh/approvals'
import type { PermissionLevel } from '@dsh/base'
import { createDelegationHarness, type DelegationHarness } from '@dsh/testkit/delegation'

let harness: DelegationHarness | undefined
afterEach(async () => {
  await harness?.dispose()
  harness = undefined
})

/** A broker whose config default allows, and a side-effecting `run` tool that records what it ran. */
async function allowingBroker(config: Partial<ApprovalService.Config> = {}) {
  harness = await createDelegationHarness({ sessionDir: false })
  await harness.plugin(ApprovalService, { default: 'allow', ...config })
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
  return { ctx: harness.ctx, ran }
}

const call = (agent: Agent, command: string) => harness!.ctx.tools.execute({ type: 'tool-call', id: `call-${command}`, name: 'run', args: { command } }, { signal: new AbortController().signal, callId: `call-${command}`, agent })

/** A root of this process delegated by a parent elsewhere (as `dsh worker` or `dsh a2a serve` make one), with what its lineage carried. */
function delegatedRoot(carried: { approvalDefault?: 'allow' | 'reject'; permissions?: PermissionLevel[] }): Promise<Agent> {
  return harness!.ctx.agents.create({ meta: { origin: 'queue', parentSession: 'the-parent', delegationDepth: 1, provider: 'queue', ...carried } })
}

describe("the broker's default in a tree a parent elsewhere delegated", () => {
  it('an allowing default here does not run what no rule decides when the lineage says the root rejects it; the reason says what to change', async () => {
    const { ctx, ran } = await allowingBroker()
    const root = await delegatedRoot({ approvalDefault: 'reject' })
    const outcome = await call(root, 'touch x')
    expect(ran).toEqual([])
    expect(outcome.permission).toMatchObject({ decision: 'reject', source: 'default', by: "the delegation tree's root (its lineage)" })
    expect(outcome.permission.decision === 'reject' && outcome.permission.reason).toMatch(/approvals default its lineage carried is reject.*rule in the root's config.*--permission allow/)
    // An in-process child below it is in the same tree: bounded the same way.
    const below = await ctx.agents.create({ parent: root, meta: { parentSession: root.id, delegationDepth: 2, provider: 'spawn', origin: 'subagent' } })
    expect((await call(below, 'touch y')).permission).toMatchObject({ decision: 'reject', source: 'default' })
    expect(ran).toEqual([])
    expect(ctx.approvals.defaultFor(below)).toEqual({ decision: 'reject', by: "the delegation tree's root (its lineage)", bound: 'lineage' })
  })

  it('a lineage that carried no default (an older parent) runs only what its rules allow; the reason names the older parent', async () => {
    const { ctx, ran } = await allowingBroker()
    const root = await delegatedRoot({ permissions: [{ from: 'config', allow: ['run(make test)'] }] })
    expect((await call(root, 'make test')).permission).toMatchObject({ decision: 'allow-once', source: 'rule' })
    const refused = await call(root, 'touch x')
    expect(refused.permission).toMatchObject({ decision: 'reject', source: 'default' })
    expect(refused.permission.decision === 'reject' && refused.permission.reason).toMatch(/lineage does not say what its root allows.*older dsh/)
    expect(ran).toEqual(['make test'])
    expect(ctx.approvals.defaultFor(root).bound).toBe('unsaid')
  })

  it('a lineage that says the root allows leaves the allowing default here deciding; a tree rooted here is not bounded', async () => {
    const { ctx, ran } = await allowingBroker()
    const allowed = await delegatedRoot({ approvalDefault: 'allow' })
    expect((await call(allowed, 'touch x')).permission).toMatchObject({ decision: 'allow-once', source: 'default', by: 'the default (nobody to ask)' })
    const local = await ctx.agents.create({ meta: { origin: 'cli' } })
    expect((await call(local, 'touch y')).permission).toMatchObject({ decision: 'allow-once', source: 'default' })
    expect(ran).toEqual(['touch x', 'touch y'])
  })

  it('a rejecting default here rejects whatever the lineage says, and is what a child of this tree is told', async () => {
    const { ctx, ran } = await allowingBroker({ default: 'reject' })
    const root = await delegatedRoot({ approvalDefault: 'allow' })
    expect((await call(root, 'touch x')).permission).toMatchObject({ decision: 'reject', by: 'the default (nobody to ask)' })
    expect(ran).toEqual([])
    expect(ctx.approvals.defaultFor(root)).toEqual({ decision: 'reject', by: 'the default (nobody to ask)' })
  })
})
