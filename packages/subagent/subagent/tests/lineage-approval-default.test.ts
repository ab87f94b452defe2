/**
 * The approvals default as a lineage field: what the parent's broker decides with nobody to
 * ask travels on every wire and into the child's header; a malformed value refuses the
 * lineage (never guessed); the parent's broker is asked by shape, and a parent without one,
 * or whose tree's own lineage did not say, hands on nothing.
 */
import { afterEach, describe, expect, it } from 'vitest'
import { createHarness, type Harness } from '@dsh/testkit/harness'
import { text } from '@dsh/llm'
import { ApprovalService } from '@dsh/approvals'
import { SpawnPlugin } from '@dsh/subagent-spawn'
import { A2A_LINEAGE, ACP_LINEAGE, QUEUE_LINEAGE, SubagentService, lineageHeader, lineageOf } from '../src/index.js'

let harness: Harness | undefined
afterEach(async () => {
  await harness?.dispose()
  harness = undefined
})

/** The header of a spawn child started through `ctx.subagents` (the caller's request may name a default of its own). */
async function spawnedHeader(withBroker: 'allow' | 'reject' | undefined, callerDefault?: 'allow' | 'reject') {
  harness = await createHarness({ script: [{ reply: [{ text: 'done' }] }] })
  if (withBroker !== undefined) await harness.plugin(ApprovalService, { default: withBroker })
  await harness.plugin(SubagentService)
  await harness.plugin(SpawnPlugin, {})
  const parent = await harness.agent()
  const run = await harness.ctx.subagents.start('spawn', { prompt: [text('go')], parent, signal: new AbortController().signal, ...(callerDefault && { approvalDefault: callerDefault }) })
  const header = harness.ctx.agents.get(run.id)!.session.header
  await run.result
  await run.dispose()
  return header
}

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

  it("an in-process child started through ctx.subagents records its process's broker's default; a caller's own is replaced by it, and sent on by nobody without a broker", async () => {
    expect((await spawnedHeader('allow')).approvalDefault).toBe('allow')
    expect((await spawnedHeader('reject', 'allow')).approvalDefault).toBe('reject')
    expect((await spawnedHeader(undefined, 'allow')).approvalDefault).toBeUndefined()
    expect((await spawnedHeader(undefined)).approvalDefault).toBeUndefined()
  })
})
