/**
 * Usage following of the tree gate (`src/tree-usage.ts`), tested directly and through the
 * gate: a cumulative count that goes backwards (a transport that restarted its count) must
 * neither subtract nor go negative, and must not let the next report count twice.
 */
import { afterEach, describe, expect, it } from 'vitest'
import type { SubagentProgress, SubagentRequest, SubagentRun, SubagentUsage } from '@dsh/subagent'
import { createHarness, type Harness } from '@dsh/testkit/harness'
import { advance, countingSink, followSession, type TokenCount } from '../src/tree-usage.js'
import { TreeGate, type BudgetEvent } from '../src/tree-limits.js'

let harness: Harness | undefined

afterEach(async () => {
  await harness?.dispose()
  harness = undefined
})

const usage = (outputTokens: number, inputTokens = 0): SubagentUsage => ({ inputTokens, outputTokens, cachedInputTokens: 0 })

describe('a cumulative usage count', () => {
  it('adds what each report grows by', () => {
    const counted: TokenCount = { inputTokens: 0, outputTokens: 0 }
    expect(advance(counted, usage(10, 100))).toEqual({ inputTokens: 100, outputTokens: 10 })
    expect(advance(counted, usage(25, 150))).toEqual({ inputTokens: 50, outputTokens: 15 })
    expect(counted).toEqual({ inputTokens: 150, outputTokens: 25 })
  })

  it('that goes backwards adds nothing, takes nothing back, and counts only what later goes past its highest figure', () => {
    const counted: TokenCount = { inputTokens: 0, outputTokens: 0 }
    advance(counted, usage(40, 400))
    // The transport restarted its count: smaller on both, then on one.
    expect(advance(counted, usage(5, 30))).toBeUndefined()
    expect(advance(counted, usage(10, 500))).toEqual({ inputTokens: 100, outputTokens: 0 })
    expect(counted).toEqual({ inputTokens: 500, outputTokens: 40 })
    // Growing again from the restart: only what passes the highest figure counts.
    expect(advance(counted, usage(45, 500))).toEqual({ inputTokens: 0, outputTokens: 5 })
    expect(counted.outputTokens).toBe(45)
  })

  it('that goes backwards through the gate leaves its tree budget where it was: the tree is spent at its bound, not before', async () => {
    harness = await createHarness()
    const parent = await harness.agent()
    const events: BudgetEvent[] = []
    const gate = new TreeGate(
      { budget: { outputTokens: 100, warnAt: 0.99 } },
      { sessionOf: () => undefined, warn: () => {}, prices: () => ({}), tell: () => {}, event: (event) => events.push(event), queued: () => {} },
    )
    let report: (update: SubagentProgress) => void = () => {}
    const cancelled: unknown[] = []
    const run: SubagentRun = { id: 'remote-1', local: false, result: new Promise(() => {}), cancel: (reason) => void cancelled.push(reason), dispose: async () => {} }
    const request: SubagentRequest = { prompt: [{ type: 'text', text: 'go' }], parent, signal: new AbortController().signal }
    await gate.start('a2a', request, async (handed) => {
      // What the service puts in front of the progress channel the provider reports to.
      const sink = handed.countUsage!(undefined)
      report = (update) => sink.report(update)
      return run
    })
    report({ kind: 'usage', usage: usage(60) })
    // The remote child's transport restarted its count: 30 is below the 60 counted.
    report({ kind: 'usage', usage: usage(30) })
    // Back to 70: 10 more, not 40 (70 - 30).
    report({ kind: 'usage', usage: usage(70) })
    report({ kind: 'usage', usage: usage(99) })
    expect(events.filter((event) => event.kind === 'spent')).toEqual([])
    expect(cancelled).toEqual([])
    report({ kind: 'usage', usage: usage(100) })
    expect(events.filter((event) => event.kind === 'spent')).toMatchObject([{ limit: 'outputTokens', used: 100, bound: 100 }])
    expect(cancelled).toHaveLength(1)
  })
})

describe('a counting progress sink', () => {
  it('hands usage reports to the count and passes every update on', () => {
    const counted: SubagentUsage[] = []
    const passed: SubagentProgress[] = []
    const sink = countingSink({ report: (update) => void passed.push(update) }, (reported) => void counted.push(reported))
    const updates: SubagentProgress[] = [
      { kind: 'text', text: 'hi' },
      { kind: 'usage', usage: usage(3, 7) },
    ]
    for (const update of updates) sink.report(update)
    expect(counted).toEqual([usage(3, 7)])
    expect(passed).toEqual(updates)
    // With nobody downstream, usage is still counted.
    countingSink(undefined, (reported) => void counted.push(reported)).report({ kind: 'usage', usage: usage(4) })
    expect(counted).toHaveLength(2)
  })
})

describe("following a session's model calls", () => {
  it('counts the calls already in it, then each new one, with the running total', async () => {
    harness = await createHarness({ script: [{ reply: [{ text: 'one reply of some length' }, { text: 'and a second, longer reply than the first' }] }] })
    const agent = await harness.agent()
    await agent.followup('first')
    const calls: Array<{ total: SubagentUsage; outputTokens: number }> = []
    const stop = followSession(agent.session, (total, call) => calls.push({ total: { ...total }, outputTokens: call.outputTokens }))
    expect(calls).toHaveLength(1)
    const first = calls[0]!.outputTokens
    expect(first).toBeGreaterThan(0)
    expect(calls[0]!.total.outputTokens).toBe(first)
    await agent.followup('second')
    expect(calls).toHaveLength(2)
    expect(calls[1]!.total.outputTokens).toBe(first + calls[1]!.outputTokens)
    stop()
  })
})
