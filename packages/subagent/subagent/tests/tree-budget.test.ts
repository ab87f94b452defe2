/**
 * Budget accounting of the tree gate (`src/tree-budget.ts`), tested directly: a real root
 * agent (the harness) and real slots; a child's run is a record of what it was told. Each
 * limit is spent on reaching it: one below leaves it open, exactly at it and one over
 * spend it (for `children`: that many start, the next is refused).
 */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'
import { StopRequest } from '@dsh/base'
import type { Agent } from '@dsh/agent'
import type { PriceTable } from '@dsh/llm'
import type { SubagentRun } from '@dsh/subagent'
import { createHarness, type Harness } from '@dsh/testkit/harness'
import { BudgetBook, childAccount, type BudgetEvent, type ChildAccount, type TreeBudget } from '../src/tree-budget.js'
import { TreeSlots } from '../src/tree-slots.js'

let harness: Harness
let root: Agent

beforeEach(async () => {
  harness = await createHarness()
  root = await harness.agent()
})

afterEach(async () => {
  vi.useRealTimers()
  await harness.dispose()
})

/** A book over `budget` whose host records what it says; `prices` is the llm's price table. */
function book(budget: TreeBudget | undefined, prices: PriceTable = {}) {
  const said = { warned: [] as string[], told: [] as string[], events: [] as BudgetEvent[] }
  const budgets = new BudgetBook(budget, {
    warn: (message) => said.warned.push(message),
    prices: () => prices,
    tell: (_root, text) => said.told.push(text),
    event: (event) => said.events.push(event),
  })
  const slots = new TreeSlots({ maxConcurrent: 1, maxQueued: 10, perProvider: new Map() })
  const tree = budgets.open(root, slots)
  return { budgets, tree, slots, said }
}

/** A running child of `parent` with its own `budget`, whose run records the stop it is given. */
function running(tree: ReturnType<typeof book>['tree'], parent: ChildAccount | undefined, budget?: ChildAccount['budget']) {
  const account = childAccount(parent, budget)
  const stops: unknown[] = []
  const run: SubagentRun = { id: `child-${tree.active.size + 1}`, local: true, result: new Promise(() => {}), cancel: (reason) => void stops.push(reason), dispose: async () => {} }
  account.run = run
  tree.active.add(account)
  return { account, stops }
}

const tokens = (outputTokens: number, inputTokens = 0) => ({ inputTokens, outputTokens })

describe("a tree's token budgets", () => {
  for (const limit of ['outputTokens', 'inputTokens'] as const) {
    const used = (count: number) => (limit === 'outputTokens' ? tokens(count) : tokens(0, count))

    it(`${limit}: one below the bound leaves it open; reaching it exactly spends it and stops the running children`, () => {
      const { budgets, tree, said } = book({ [limit]: 100 })
      const child = running(tree, undefined)
      budgets.addTokens(tree, child.account, used(99))
      expect(tree.spent).toBeUndefined()
      expect(child.stops).toEqual([])
      expect(budgets.refusal(tree)).toBeUndefined()

      budgets.addTokens(tree, child.account, used(1))
      expect(tree.spent).toMatch(new RegExp(`tree's ${limit === 'outputTokens' ? 'output' : 'input'}-token budget of 100 is spent \\(100 `))
      expect(said.events.at(-1)).toMatchObject({ kind: 'spent', limit, used: 100, bound: 100 })
      expect(child.stops).toHaveLength(1)
      expect(child.stops[0]).toBeInstanceOf(StopRequest)
      expect((child.stops[0] as StopRequest).stopReason).toBe('budget')
      expect(budgets.refusal(tree)?.code).toBe('BUDGET')
    })

    it(`${limit}: one over the bound in one report spends it too, saying what was used`, () => {
      const { budgets, tree, said } = book({ [limit]: 100 })
      budgets.addTokens(tree, running(tree, undefined).account, used(101))
      expect(said.events.at(-1)).toMatchObject({ kind: 'spent', limit, used: 101, bound: 100 })
    })
  }

  it('warns the root once when the warnAt fraction is reached, not before', () => {
    const { budgets, tree, said } = book({ outputTokens: 100, warnAt: 0.5 })
    const child = running(tree, undefined).account
    budgets.addTokens(tree, child, tokens(49))
    expect(said.told).toEqual([])
    budgets.addTokens(tree, child, tokens(1))
    expect(said.told).toEqual(['budget warning: the delegation tree has used 50% of its output-token budget (50 of 100 output tokens); at the limit its running children are stopped and no more start'])
    budgets.addTokens(tree, child, tokens(10))
    expect(said.told).toHaveLength(1)
  })

  it('refuses every child waiting for a slot when it is spent', async () => {
    const { budgets, tree, slots } = book({ outputTokens: 10 })
    slots.take('spawn')
    const waiting = slots.wait('spawn', new AbortController().signal, () => {}).then(
      () => 'granted',
      (error: { code: string; message: string }) => `${error.code}: ${error.message}`,
    )
    budgets.addTokens(tree, undefined, tokens(10))
    expect(await waiting).toBe("BUDGET: budget: the delegation tree's output-token budget of 10 is spent (10 output tokens used by its children); no more children start in this tree: finish the work without delegating")
  })
})

describe("a tree's children budget", () => {
  it('lets exactly that many start and refuses the next, counting those waiting as started', async () => {
    const { budgets, tree, slots } = book({ children: 2 })
    expect(budgets.refusal(tree)).toBeUndefined()
    budgets.countStart(tree, undefined)
    expect(budgets.refusal(tree)).toBeUndefined()
    // One started and one waiting: the second is as good as started.
    slots.take('spawn')
    const waiter = slots.wait('spawn', new AbortController().signal, () => {})
    expect(budgets.refusal(tree)?.message).toBe("budget: the delegation tree's children budget of 2 is spent (1 started, 1 waiting); finish the work without delegating")
    slots.refuseAll(new Error('test over'))
    await waiter.catch(() => undefined)
    budgets.countStart(tree, undefined)
    expect(budgets.refusal(tree)?.message).toBe("budget: the delegation tree's children budget of 2 is spent (2 started); finish the work without delegating")
  })
})

describe("a tree's cost budget", () => {
  // One unit of money per output token.
  const prices: PriceTable = { 'scripted:test': { input: 0, output: 1_000_000 } }
  const call = (outputTokens: number) => ({ model: 'scripted:test', inputTokens: 0, outputTokens })

  it('one below the bound leaves it open; exactly at it spends it', () => {
    const { budgets, tree, said } = book({ cost: 5 }, prices)
    const child = running(tree, undefined)
    budgets.charge(tree, child.account, call(4))
    expect(tree.spent).toBeUndefined()
    budgets.charge(tree, child.account, call(1))
    expect(said.events.at(-1)).toMatchObject({ kind: 'spent', limit: 'cost', used: 5, bound: 5 })
    expect(child.stops).toHaveLength(1)
  })

  it('one over the bound spends it too', () => {
    const { budgets, tree, said } = book({ cost: 5 }, prices)
    budgets.charge(tree, running(tree, undefined).account, call(6))
    expect(said.events.at(-1)).toMatchObject({ kind: 'spent', limit: 'cost', used: 6, bound: 5 })
  })

  it('stops a child whose model has no price: its spend cannot be counted', () => {
    const { budgets, tree } = book({ cost: 5 }, prices)
    const child = running(tree, undefined)
    budgets.charge(tree, child.account, { model: 'other:model', inputTokens: 1, outputTokens: 1 })
    expect((child.stops[0] as StopRequest).message).toBe('budget: the delegation tree has a cost budget of 5, but model "other:model" has no price in the prices table, so this child\'s spend cannot be counted; it was stopped')
    expect(tree.spent).toBeUndefined()
  })

  it('is refused as a config error when there is no price table at all', () => {
    const { budgets, tree } = book({ cost: 5 })
    expect(budgets.refusal(tree)?.code).toBe('INVALID_CONFIG')
  })
})

describe("a tree's wall-time budget", () => {
  it('is spent at its deadline, not a millisecond before', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'Date'] })
    const { tree, said } = book({ wallTimeMs: 1000 })
    vi.advanceTimersByTime(999)
    expect(tree.spent).toBeUndefined()
    vi.advanceTimersByTime(1)
    expect(tree.spent).toBe("budget: the delegation tree's wall-time budget of 1.0 s is spent")
    expect(said.events.at(-1)).toMatchObject({ kind: 'spent', limit: 'wallTimeMs', used: 1000, bound: 1000 })
  })
})

describe("a child's own budget", () => {
  it('covers its descendants: one token below leaves it running, reaching it stops that child and not the tree', () => {
    const { budgets, tree, said } = book(undefined)
    const parent = running(tree, undefined, { outputTokens: 10 })
    const grandchild = running(tree, parent.account)
    budgets.addTokens(tree, grandchild.account, tokens(9))
    expect(parent.stops).toEqual([])
    budgets.addTokens(tree, grandchild.account, tokens(1))
    expect((parent.stops[0] as StopRequest).message).toBe("budget: this child's output-token budget of 10 is spent (10 output tokens used by it and its children); it was stopped")
    expect(said.events.at(-1)).toMatchObject({ kind: 'stopped', limit: 'outputTokens', used: 10, bound: 10, childId: 'child-1' })
    expect(tree.spent).toBeUndefined()
  })

  it('lets exactly its children budget start below it and refuses the next', () => {
    const { budgets, tree } = book(undefined)
    const parent = running(tree, undefined, { children: 1 })
    expect(budgets.childrenRefusal(parent.account)).toBeUndefined()
    budgets.countStart(tree, parent.account)
    expect(budgets.childrenRefusal(parent.account)?.message).toBe("budget: the delegating child's children budget of 1 is spent (1 started below it); finish the work without delegating")
  })

  it('stops the child at its wall-time deadline, not a millisecond before', () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'Date'] })
    const { budgets, tree } = book(undefined)
    const child = running(tree, undefined, { wallTimeMs: 500 })
    budgets.startClock(tree, child.account)
    vi.advanceTimersByTime(499)
    expect(child.stops).toEqual([])
    vi.advanceTimersByTime(1)
    expect((child.stops[0] as StopRequest).message).toBe("budget: this child's wall-time budget of 0.5 s is spent; it was stopped")
  })

  it('hands a child the least of its own budget and what the tree has left, floored at zero', () => {
    const { budgets, tree } = book({ outputTokens: 100, children: 5 })
    const parent = running(tree, undefined, { outputTokens: 30 })
    budgets.countStart(tree, undefined)
    budgets.addTokens(tree, parent.account, tokens(80))
    const child = childAccount(parent.account, { outputTokens: 50 })
    // The tree has 20 left, the parent nothing (80 of 30), the child 50 of its own.
    expect(budgets.remainingFor(tree, child)).toEqual({ outputTokens: 0, children: 4 })
  })
})
