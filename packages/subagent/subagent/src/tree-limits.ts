/**
 * Limits on a whole delegation tree (a root agent and every in-process descendant): a cap
 * on the children that run at once (in all, and per provider), with one bounded FIFO queue
 * for the rest, and a budget of tokens, cost and children started; and each child's own
 * budget (`request.budget`) over it and its descendants. Loaded only when `ctx.subagents`
 * is configured with `tree` limits or a request carries a budget; otherwise no child pays
 * for any of this.
 *
 * The one place a delegation waits for a slot: `SubagentService.start`, after `admit()`
 * and before the provider is asked for anything, so a queued child has nothing yet (no
 * session, no process) and cancelling it (its request's signal) just takes it out.
 *
 * A slot is held from the provider's start until the run's result settles. A child that
 * holds a slot lends it to one waiting child of its own: a parent blocked on a foreground
 * child would otherwise hold a slot its child needs, and a tree full of such parents
 * would never move. So nested delegation cannot deadlock; the price is that a parent that
 * lent its slot and keeps working (its child runs in the background) runs beside it.
 */
import type { Agent } from '@dsh/agent'
import type { Session, SessionEvent, SessionUpdate } from '@dsh/session'
import { costOf, type PriceTable, type Usage } from '@dsh/llm'
import { SubagentError } from './errors.js'
import type { ChildBudget, ProgressSink, SubagentProgress, SubagentRequest, SubagentResult, SubagentRun, SubagentUsage } from './types.js'

/** `tree` in `ctx.subagents`' config. */
export interface TreeLimitsConfig {
  /** Most children of one tree (any depth) running at once; more wait in the queue. */
  maxConcurrent?: number
  /** Most children of one tree waiting for a slot; beyond it a delegation is refused. */
  maxQueued?: number
  /** Most children of one tree running at once on each named provider (`{ acp: 2 }`), inside `maxConcurrent`. */
  maxConcurrentPerProvider?: Record<string, number>
  /** What one tree's children may spend together; reaching any one of these spends the budget. */
  budget?: TreeBudget
}

/** A tree's budget: its children's summed usage, counted as it happens, and how many start. */
export interface TreeBudget {
  outputTokens?: number
  inputTokens?: number
  /** Children started in the tree, at any depth. */
  children?: number
  /** Money in the unit of `ctx.llm`'s `prices` table, priced per model call of in-process children. */
  cost?: number
}

/** What the gate needs of its service. */
export interface TreeGateHost {
  /** The session of in-process child `id` while it is live: where its usage is read as it happens. */
  sessionOf(id: string): Session | undefined
  /** A line for the log (a budget spent). */
  warn(message: string): void
  /** `ctx.llm`'s price table (empty when none is configured). */
  prices(): PriceTable
}

type TokenLimit = 'outputTokens' | 'inputTokens'
const TOKEN_WORDS: Record<TokenLimit, string> = { outputTokens: 'output-token', inputTokens: 'input-token' }
const SPENT_WORDS: Record<TokenLimit, string> = { outputTokens: 'output tokens', inputTokens: 'input tokens' }

/** The queue's bound where the config sets none. */
export const DEFAULT_MAX_QUEUED = 1000

interface Waiter {
  /** The provider it would start on (for `maxConcurrentPerProvider`). */
  provider: string
  grant: (slot: Slot) => void
  fail: (error: Error) => void
  /** Set once granted, failed or cancelled: a settled waiter left in the queue is skipped. */
  done: boolean
}

/** A running child's hold on its tree. */
interface Slot {
  tree: Tree
  /** The child whose slot this is on loan from (the parent), or undefined for a slot of the tree's own. */
  lender: Active | undefined
  provider: string
}

/** One running child of a tree, local or remote: its slot, what it has used and how to stop it. */
interface Active {
  run: SubagentRun | undefined
  /** Whether this child's slot is on loan to one of its own children. */
  lent: boolean
  /** Its delegating parent, when that is a running child of the tree too (not the root). */
  parent: Active | undefined
  /** Its own budget (`request.budget`), covering it and its descendants. */
  budget: ChildBudget | undefined
  /** Whether it or an ancestor has a budget: then its usage is followed even without a tree budget. */
  limited: boolean
  /** Its usage so far, as the latest cumulative figures (they only grow: a smaller one is ignored). */
  inputTokens: number
  outputTokens: number
  /** What it and its descendants have used together. */
  subtree: { inputTokens: number; outputTokens: number }
  /** Why a budget stopped it, once one did: its result then ends `error` with this. */
  stopped?: string
}

class Tree {
  running = 0
  /** Running children per provider, kept only for providers with a cap. */
  readonly byProvider = new Map<string, number>()
  /** Waiters not yet granted, failed or cancelled (those left in `queue` are skipped). */
  waiting = 0
  /** Children started, at any depth. */
  started = 0
  /** What the tree's children have used together. */
  inputTokens = 0
  outputTokens = 0
  cost = 0
  /** Set once the budget is spent: why, in words for the parent's model. */
  spent: string | undefined
  readonly active = new Set<Active>()
  /** FIFO; `head` is the next to be served, so a long queue is not shifted on every grant. */
  queue: Waiter[] = []
  head = 0
  /** Running in-process children by agent id: a parent that holds a slot can lend it, and its budget covers its children. */
  readonly members = new Map<string, Active>()
}

/**
 * The trees of one `ctx.subagents`, each found from any of its agents by walking `parent`
 * up to the root (an in-process child's parent is its delegating agent). Held weakly by
 * the root agent, so a tree is forgotten with it.
 */
export class TreeGate {
  private readonly trees = new WeakMap<Agent, Tree>()
  readonly maxConcurrent: number | undefined
  readonly maxQueued: number
  private readonly providerCaps: ReadonlyMap<string, number>
  readonly budget: TreeBudget | undefined
  /** Whether any token limit is set: only then is usage followed. */
  private readonly countsTokens: boolean

  constructor(config: TreeLimitsConfig, private readonly host: TreeGateHost) {
    this.maxConcurrent = config.maxConcurrent
    this.maxQueued = config.maxQueued ?? DEFAULT_MAX_QUEUED
    this.providerCaps = new Map(Object.entries(config.maxConcurrentPerProvider ?? {}))
    const budget = config.budget
    this.budget = budget !== undefined && Object.values(budget).some((limit) => limit !== undefined) ? budget : undefined
    this.countsTokens = this.budget?.outputTokens !== undefined || this.budget?.inputTokens !== undefined || this.budget?.cost !== undefined
  }

  /**
   * Start `request` through `start` once its tree has a slot: at once when one is free,
   * else after the children queued before it. `onWait(true)` is called (synchronously,
   * before this returns) when it has to wait and `onWait(false)` when it leaves the queue.
   * Rejects `QUEUE_FULL` beyond the queue's bound and `ABORTED` when the request's signal
   * aborts while it waits (nothing was started).
   */
  start(provider: string, request: SubagentRequest, start: (request: SubagentRequest) => Promise<SubagentRun>): Promise<SubagentRun> {
    const tree = this.treeOf(request.parent)
    const refusal = this.refusal(tree)
    if (refusal !== undefined) return Promise.reject(refusal)
    // A free slot means nobody waiting could use it (each release serves the queue first), so
    // taking it jumps no queue: the waiters are all held by their provider's cap.
    const slot = this.take(tree, provider) ?? this.lend(tree, request.parent, provider)
    if (slot !== undefined) return this.run(slot, request, start)
    // Cancelled already: it would wait for a slot only to be refused then.
    if (request.signal.aborted) return Promise.reject(new SubagentError('ABORTED', 'the delegation was cancelled before its child was started', { cause: request.signal.reason }))
    if (tree.waiting >= this.maxQueued) {
      const cap = this.providerCaps.get(provider)
      const caps = [this.maxConcurrent !== undefined && `maxConcurrent ${this.maxConcurrent}`, cap !== undefined && `${cap} at once on ${provider}`].filter(Boolean).join(', ')
      return Promise.reject(
        new SubagentError(
          'QUEUE_FULL',
          `the delegation tree of ${rootOf(request.parent).id} has ${tree.running} children running (${caps}) and ${tree.waiting} waiting, the most allowed (maxQueued ${this.maxQueued}); wait for some to finish before delegating more`,
        ),
      )
    }
    return new Promise<Slot>((resolve, reject) => {
      const { signal } = request
      const onAbort = () => {
        if (waiter.done) return
        waiter.done = true
        tree.waiting--
        request.onWait?.(false)
        reject(new SubagentError('ABORTED', 'the delegation was cancelled while it waited for a slot; it was never started', { cause: signal.reason }))
      }
      const waiter: Waiter = {
        provider,
        done: false,
        grant: (slot) => {
          waiter.done = true
          tree.waiting--
          signal.removeEventListener('abort', onAbort)
          request.onWait?.(false)
          resolve(slot)
        },
        fail: (error) => {
          waiter.done = true
          tree.waiting--
          signal.removeEventListener('abort', onAbort)
          request.onWait?.(false)
          reject(error)
        },
      }
      tree.queue.push(waiter)
      tree.waiting++
      signal.addEventListener('abort', onAbort, { once: true })
      request.onWait?.(true)
    }).then((slot) => this.run(slot, request, start))
  }

  /** Why the budget lets no more children of `tree` start, or undefined. */
  private refusal(tree: Tree): SubagentError | undefined {
    if (tree.spent !== undefined) return new SubagentError('BUDGET', `${tree.spent}; no more children start in this tree: finish the work without delegating`)
    if (this.budget?.cost !== undefined && Object.keys(this.host.prices()).length === 0) {
      return new SubagentError('INVALID_CONFIG', `tree.budget.cost (${this.budget.cost}) needs a price table: set prices in the llm service's config (model spec → { input, output } per million tokens)`)
    }
    const children = this.budget?.children
    // Children queued now will start later: they count already.
    if (children !== undefined && tree.started + tree.waiting >= children) {
      return new SubagentError('BUDGET', `budget: the delegation tree's children budget of ${children} is spent (${tree.started} started${tree.waiting ? `, ${tree.waiting} waiting` : ''}); finish the work without delegating`)
    }
    return undefined
  }

  /**
   * Record `usage` (cumulative) of one child and spend the tree's budget when it reaches a
   * limit: every running child is stopped, every waiting one refused, and no more start.
   */
  private used(tree: Tree, active: Active, usage: SubagentUsage): void {
    // Figures only grow: a smaller one (a transport that restarted its count) grants nothing back.
    const input = Math.max(0, usage.inputTokens - active.inputTokens)
    const output = Math.max(0, usage.outputTokens - active.outputTokens)
    if (input === 0 && output === 0) return
    active.inputTokens += input
    active.outputTokens += output
    tree.inputTokens += input
    tree.outputTokens += output
    // A child's own budget covers its descendants: each ancestor with one is checked.
    for (let holder: Active | undefined = active; holder !== undefined; holder = holder.parent) {
      holder.subtree.inputTokens += input
      holder.subtree.outputTokens += output
      if (holder.budget === undefined || holder.stopped !== undefined) continue
      for (const limit of ['outputTokens', 'inputTokens'] as const) {
        const bound = holder.budget[limit]
        if (bound === undefined || holder.subtree[limit] < bound) continue
        holder.stopped = `budget: this child's ${TOKEN_WORDS[limit]} budget of ${bound} is spent (${holder.subtree[limit]} ${SPENT_WORDS[limit]} used by it and its children); it was stopped`
        this.host.warn(holder.stopped)
        holder.run?.cancel(holder.stopped)
        break
      }
    }
    if (tree.spent !== undefined) return
    for (const limit of ['outputTokens', 'inputTokens'] as const) {
      const bound = this.budget?.[limit]
      if (bound === undefined || tree[limit] < bound) continue
      this.spend(tree, `budget: the delegation tree's ${TOKEN_WORDS[limit]} budget of ${bound} is spent (${tree[limit]} ${SPENT_WORDS[limit]} used by its children)`)
      return
    }
  }

  /** Charge one model call of an in-process child against the tree's cost budget. */
  private charge(tree: Tree, active: Active, usage: Usage): void {
    const bound = this.budget?.cost
    if (bound === undefined) return
    const cost = costOf(usage, this.host.prices())
    if (cost === undefined) {
      if (active.stopped !== undefined) return
      // Unpriced spend cannot be bounded: stopping is the only answer that grants nothing.
      active.stopped = `budget: the delegation tree has a cost budget of ${bound}, but model "${usage.model ?? 'unrecorded'}" has no price in the prices table, so this child's spend cannot be counted; it was stopped`
      this.host.warn(active.stopped)
      active.run?.cancel(active.stopped)
      return
    }
    tree.cost += cost
    if (tree.spent === undefined && tree.cost >= bound) this.spend(tree, `budget: the delegation tree's cost budget of ${bound} is spent (${round(tree.cost)} used by its children, by the prices table)`)
  }

  private spend(tree: Tree, why: string): void {
    tree.spent = why
    this.host.warn(`${why}: stopping ${tree.active.size} running and ${tree.waiting} waiting children`)
    for (const active of tree.active) {
      if (active.stopped !== undefined) continue
      active.stopped = `${why}; this child was stopped`
      active.run?.cancel(active.stopped)
    }
    const refusal = new SubagentError('BUDGET', `${why}; no more children start in this tree: finish the work without delegating`)
    while (tree.head < tree.queue.length) {
      const waiter = tree.queue[tree.head]!
      tree.queue[tree.head++] = undefined as unknown as Waiter
      if (!waiter.done) waiter.fail(refusal)
    }
    tree.queue = []
    tree.head = 0
  }

  /** A slot of the tree's own for a child on `provider`, when the caps leave one free. */
  private take(tree: Tree, provider: string): Slot | undefined {
    if (this.maxConcurrent !== undefined && tree.running >= this.maxConcurrent) return undefined
    const cap = this.providerCaps.get(provider)
    if (cap !== undefined) {
      const running = tree.byProvider.get(provider) ?? 0
      if (running >= cap) return undefined
      tree.byProvider.set(provider, running + 1)
    }
    tree.running++
    return { tree, lender: undefined, provider }
  }

  /**
   * The slot of `parent`, a running child of the tree, on loan to one of its own children
   * when it has not lent it already: a parent waiting on its child must not starve it.
   */
  private lend(tree: Tree, parent: Agent, provider: string): Slot | undefined {
    const lender = tree.members.get(parent.id)
    if (lender === undefined || lender.lent) return undefined
    lender.lent = true
    return { tree, lender, provider }
  }

  /** Give `slot` back: to its lender, or to the tree, which then serves those waiting in order. */
  private release(slot: Slot): void {
    const { tree } = slot
    if (slot.lender !== undefined) {
      slot.lender.lent = false
      return
    }
    tree.running--
    if (this.providerCaps.has(slot.provider)) tree.byProvider.set(slot.provider, tree.byProvider.get(slot.provider)! - 1)
    this.serve(tree)
  }

  /**
   * Grant free slots to waiters, first come first served: the first one whose provider has
   * room (without provider caps, simply the first). A waiter whose provider is at its cap
   * does not hold up those behind it on other providers.
   */
  private serve(tree: Tree): void {
    while (tree.waiting > 0) {
      // Skip what was cancelled at the head, and compact now and then.
      while (tree.head < tree.queue.length && tree.queue[tree.head]!.done) tree.queue[tree.head++] = undefined as unknown as Waiter
      if (tree.head > 1024 && tree.head * 2 > tree.queue.length) {
        tree.queue = tree.queue.slice(tree.head)
        tree.head = 0
      }
      let index = tree.head
      let slot: Slot | undefined
      for (; index < tree.queue.length; index++) {
        const waiter = tree.queue[index]!
        if (waiter.done) continue
        slot = this.take(tree, waiter.provider)
        if (slot !== undefined) break
        // Without provider caps, or at the tree's cap, nobody further back can start either.
        if (this.providerCaps.size === 0 || (this.maxConcurrent !== undefined && tree.running >= this.maxConcurrent)) return
      }
      if (slot === undefined) return
      const waiter = tree.queue[index]!
      if (index === tree.head) tree.queue[tree.head++] = undefined as unknown as Waiter
      else tree.queue.splice(index, 1)
      waiter.grant(slot)
    }
  }

  /** Start the provider on a slot already held; the slot is released when the run's result settles. */
  private async run(slot: Slot, request: SubagentRequest, start: (request: SubagentRequest) => Promise<SubagentRun>): Promise<SubagentRun> {
    const { tree } = slot
    // Spent while this child waited (its waiter was failed) or a moment ago: nothing starts.
    const refusal = tree.spent !== undefined ? this.refusal(tree) : undefined
    const parent = tree.members.get(request.parent.id)
    const active: Active = {
      run: undefined,
      lent: false,
      parent,
      budget: request.budget,
      limited: request.budget !== undefined || parent?.limited === true,
      inputTokens: 0,
      outputTokens: 0,
      subtree: { inputTokens: 0, outputTokens: 0 },
    }
    const counts = this.countsTokens || active.limited
    let run: SubagentRun
    try {
      if (refusal !== undefined) throw refusal
      if (request.signal.aborted) throw new SubagentError('ABORTED', 'the delegation was cancelled before its child was started', { cause: request.signal.reason })
      tree.started++
      tree.active.add(active)
      run = await start(counts ? this.counted(tree, active, request) : request)
    } catch (error) {
      tree.active.delete(active)
      this.release(slot)
      throw error
    }
    active.run = run
    // Spent while the provider started it: stopped at once.
    if (active.stopped !== undefined) run.cancel(active.stopped)
    if (run.local) tree.members.set(run.id, active)
    const unfollow = counts && run.local ? this.followLocal(tree, active, run.id) : undefined
    const result = run.result
      .then((settled): SubagentResult => {
        // Stopped by the budget: the parent is told so, not that the child was cancelled.
        if (active.stopped === undefined || settled.stopReason === 'completed') return settled
        return { ...settled, stopReason: 'error', diagnostic: active.stopped }
      })
      .finally(() => {
        unfollow?.()
        tree.active.delete(active)
        if (tree.members.get(run.id) === active) tree.members.delete(run.id)
        this.release(slot)
      })
    return withResult(run, result)
  }

  /** `request` with a progress sink that also counts the child's usage reports (a remote child's). */
  private counted(tree: Tree, active: Active, request: SubagentRequest): SubagentRequest {
    const downstream = request.progress
    const sink: ProgressSink = {
      report: (update: SubagentProgress) => {
        if (update.kind === 'usage') {
          this.used(tree, active, update.usage)
          // A remote child's usage names no model, so it has no price: a cost budget cannot count it.
          if (this.budget?.cost !== undefined && active.run?.local !== true) this.charge(tree, active, { inputTokens: update.usage.inputTokens, outputTokens: update.usage.outputTokens })
        }
        downstream?.report(update)
      },
    }
    return { ...request, progress: sink }
  }

  /** Count an in-process child's usage from its own session, as each model call lands. */
  private followLocal(tree: Tree, active: Active, id: string): (() => void) | undefined {
    const session = this.host.sessionOf(id)
    if (session === undefined) return undefined
    const total: SubagentUsage = { inputTokens: 0, outputTokens: 0, cachedInputTokens: 0 }
    const onEvent = (event: SessionEvent | SessionUpdate) => {
      if (event.type !== 'assistant/message' || event.usage === undefined) return
      total.inputTokens += event.usage.inputTokens
      total.outputTokens += event.usage.outputTokens
      this.used(tree, active, total)
      this.charge(tree, active, event.usage)
    }
    // What it did before its run was published: its own events (a fork's seed is its parent's).
    for (let seq = session.seedLength; seq < session.length; seq++) {
      const event = session.at(seq)
      if (event !== undefined) onEvent(event)
    }
    return session.subscribe(onEvent)
  }


  private treeOf(agent: Agent): Tree {
    const root = rootOf(agent)
    let tree = this.trees.get(root)
    if (tree === undefined) {
      tree = new Tree()
      this.trees.set(root, tree)
    }
    return tree
  }
}

/** The root of `agent`'s delegation tree in this process. */
function rootOf(agent: Agent): Agent {
  let root = agent
  while (root.parent !== undefined) root = root.parent
  return root
}

/** `run` with another `result`, everything else passed through. */
function withResult(run: SubagentRun, result: Promise<SubagentResult>): SubagentRun {
  const wrapped: { -readonly [K in keyof SubagentRun]: SubagentRun[K] } = {
    id: run.id,
    local: run.local,
    result,
    cancel: (reason) => run.cancel(reason),
    dispose: () => run.dispose(),
  }
  if (run.sendMessage !== undefined) wrapped.sendMessage = (message) => run.sendMessage!(message)
  if (run.storedAt !== undefined) wrapped.storedAt = run.storedAt
  return wrapped
}

/** A cost for a person: four significant digits. */
function round(cost: number): string {
  return String(Number(cost.toPrecision(4)))
}
