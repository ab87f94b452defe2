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
 *
 * Budgets reach across processes: each child is handed what it may still use (the least
 * of its own budget, its ancestors' and its tree's: `remainingFor`), which a remote child
 * carries in its lineage; there it is its session header's `budget`, and this gate bounds
 * that root's tree by it (its own model calls included), so a `dsh acp` or `dsh a2a serve`
 * child stops its own descendants at the root's limit. A child stopped by a budget is
 * cancelled with a `StopRequest('budget', why)` and its result ends `budget`, saying which.
 */
import { StopRequest } from '@dsh/base'
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
  /** How long the tree's children may run, from the tree's first delegation (or, for a remote child's tree, from its session's creation). */
  wallTimeMs?: number
  /** The fraction of a limit at which the tree's root is warned (default 0.8). */
  warnAt?: number
}

/** What a budget event says (the `subagent/budget` event of `ctx.subagents`). */
export interface BudgetEvent {
  /** The root agent of the tree. */
  rootId: string
  /** `warning`: a limit's `warnAt` reached; `spent`: the tree's budget spent; `stopped`: one child stopped by its own budget. */
  kind: 'warning' | 'spent' | 'stopped'
  /** Which limit: `outputTokens`, `inputTokens`, `cost`, `children`, `wallTimeMs`. */
  limit: BudgetLimit
  used: number
  bound: number
  /** In words, for a person or a model. */
  text: string
  /** The child a `stopped` event is about. */
  childId?: string
}

export type BudgetLimit = 'outputTokens' | 'inputTokens' | 'cost' | 'children' | 'wallTimeMs'

/** What the gate needs of its service. */
export interface TreeGateHost {
  /** The session of in-process child `id` while it is live: where its usage is read as it happens. */
  sessionOf(id: string): Session | undefined
  /** A line for the log (a budget spent). */
  warn(message: string): void
  /** `ctx.llm`'s price table (empty when none is configured). */
  prices(): PriceTable
  /** Tell the tree's root agent (its model reads it at its next step): a warning, a spent budget. */
  tell(root: Agent, text: string): void
  /** Announce a budget event (the live tree, `--json`). */
  event(event: BudgetEvent): void
  /** Announce that `request` waits for a slot (`true`), or no longer does (`false`: it starts, or was cancelled or refused). */
  queued(request: SubagentRequest, provider: string, waiting: boolean): void
}

/** The default fraction of a limit at which the root is warned. */
export const DEFAULT_WARN_AT = 0.8

type TokenLimit = 'outputTokens' | 'inputTokens'
const TOKEN_WORDS: Record<TokenLimit, string> = { outputTokens: 'output-token', inputTokens: 'input-token' }
const SPENT_WORDS: Record<TokenLimit, string> = { outputTokens: 'output tokens', inputTokens: 'input tokens' }
const LIMIT_WORDS: Record<BudgetLimit, string> = { outputTokens: 'output-token', inputTokens: 'input-token', cost: 'cost', children: 'children', wallTimeMs: 'wall-time' }

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
  subtree: { inputTokens: number; outputTokens: number; cost: number; children: number }
  /** When its own wall-time budget (or an ancestor's) runs out, in ms since the epoch. */
  deadline?: number
  /** Stops it at `deadline`. */
  timer?: Timer
  /** Why a budget stopped it, once one did: its result then ends `budget` with this. */
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
  /** This tree's budget: the configured one, and what the root's own lineage allows (a remote child's tree). */
  budget: TreeBudget | undefined
  /** Whether its usage must be followed (a token or cost limit). */
  countsUsage = false
  /** The tree's root. */
  root!: Agent
  /** When the wall-time budget runs out, and the timer that spends it then. */
  deadline: number | undefined
  timer: Timer | undefined
  /** Limits the root was warned about already (`warnAt`). */
  readonly warned = new Set<BudgetLimit>()
  /** Stops following the root's own usage (a remote child's tree counts its root too). */
  unfollowRoot: (() => void) | undefined
  /** What the root's own model calls used, when they are counted. */
  readonly rootCount = { inputTokens: 0, outputTokens: 0 }
  /** Its budget came from its root's lineage: the root is a remote child, bounded with its tree. */
  given = false
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
  /** The configured budget of every tree (a remote child's tree may have a smaller one, from its lineage). */
  readonly budget: TreeBudget | undefined

  constructor(config: TreeLimitsConfig, private readonly host: TreeGateHost) {
    this.maxConcurrent = config.maxConcurrent
    this.maxQueued = config.maxQueued ?? DEFAULT_MAX_QUEUED
    this.providerCaps = new Map(Object.entries(config.maxConcurrentPerProvider ?? {}))
    const budget = config.budget
    this.budget = budget !== undefined && Object.entries(budget).some(([key, limit]) => key !== 'warnAt' && limit !== undefined) ? budget : undefined
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
        this.host.queued(request, provider, false)
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
          this.host.queued(request, provider, false)
          resolve(slot)
        },
        fail: (error) => {
          waiter.done = true
          tree.waiting--
          signal.removeEventListener('abort', onAbort)
          request.onWait?.(false)
          this.host.queued(request, provider, false)
          reject(error)
        },
      }
      tree.queue.push(waiter)
      tree.waiting++
      signal.addEventListener('abort', onAbort, { once: true })
      request.onWait?.(true)
      this.host.queued(request, provider, true)
    }).then((slot) => this.run(slot, request, start))
  }

  /** Why the budget lets no more children of `tree` start, or undefined. */
  private refusal(tree: Tree): SubagentError | undefined {
    if (tree.spent !== undefined) return new SubagentError('BUDGET', `${tree.spent}; no more children start in this tree: finish the work without delegating`)
    if (tree.budget?.cost !== undefined && Object.keys(this.host.prices()).length === 0) {
      return new SubagentError('INVALID_CONFIG', `tree.budget.cost (${tree.budget.cost}) needs a price table: set prices in the llm service's config (model spec → { input, output } per million tokens)`)
    }
    const children = tree.budget?.children
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
  private used(tree: Tree, active: Active | undefined, usage: SubagentUsage): void {
    // Figures only grow: a smaller one (a transport that restarted its count) grants nothing back.
    const counted = active ?? tree.rootCount
    const input = Math.max(0, usage.inputTokens - counted.inputTokens)
    const output = Math.max(0, usage.outputTokens - counted.outputTokens)
    if (input === 0 && output === 0) return
    counted.inputTokens += input
    counted.outputTokens += output
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
        this.stop(tree, holder, limit, holder.subtree[limit], bound, `budget: this child's ${TOKEN_WORDS[limit]} budget of ${bound} is spent (${holder.subtree[limit]} ${SPENT_WORDS[limit]} used by it and its children); it was stopped`)
        break
      }
    }
    if (tree.spent !== undefined) return
    for (const limit of ['outputTokens', 'inputTokens'] as const) {
      const bound = tree.budget?.[limit]
      if (bound === undefined) continue
      if (tree[limit] >= bound) {
        this.spend(tree, limit, tree[limit], bound, `budget: the delegation tree's ${TOKEN_WORDS[limit]} budget of ${bound} is spent (${tree[limit]} ${SPENT_WORDS[limit]} used${tree.unfollowRoot ? ' in this tree, its root included' : ' by its children'})`)
        return
      }
      this.warnIfNear(tree, limit, tree[limit], bound, `${tree[limit]} of ${bound} ${SPENT_WORDS[limit]}`)
    }
  }

  /** Stop one child (and what runs below it) for its own budget: it ends `budget`, saying why. */
  private stop(tree: Tree, active: Active, limit: BudgetLimit, used: number, bound: number, why: string): void {
    if (active.stopped !== undefined) return
    active.stopped = why
    this.host.warn(why)
    active.run?.cancel(new StopRequest('budget', why))
    const childId = active.run?.id
    this.host.event({ rootId: tree.root.id, kind: 'stopped', limit, used, bound, text: why, ...(childId !== undefined && { childId }) })
  }

  /** Warn the root once per limit when its use reaches the `warnAt` fraction of it. */
  private warnIfNear(tree: Tree, limit: BudgetLimit, used: number, bound: number, usedText: string): void {
    if (tree.warned.has(limit)) return
    const fraction = tree.budget?.warnAt ?? DEFAULT_WARN_AT
    if (used < fraction * bound) return
    tree.warned.add(limit)
    const text = `budget warning: the delegation tree has used ${Math.round((used / bound) * 100)}% of its ${LIMIT_WORDS[limit]} budget (${usedText}); at the limit its running children are stopped and no more start`
    this.host.warn(text)
    this.host.tell(tree.root, text)
    this.host.event({ rootId: tree.root.id, kind: 'warning', limit, used, bound, text })
  }

  /** Charge one model call of an in-process child against the tree's cost budget. */
  private charge(tree: Tree, active: Active | undefined, usage: Usage): void {
    const bound = tree.budget?.cost
    const limited = active !== undefined && chain(active).some((holder) => holder.budget?.cost !== undefined)
    if (bound === undefined && !limited) return
    const cost = costOf(usage, this.host.prices())
    if (cost === undefined) {
      if (active === undefined || active.stopped !== undefined) return
      // Unpriced spend cannot be bounded: stopping is the only answer that grants nothing.
      const whose = bound !== undefined ? `the delegation tree has a cost budget of ${bound}` : 'this child has a cost budget'
      this.stop(tree, active, 'cost', 0, bound ?? 0, `budget: ${whose}, but model "${usage.model ?? 'unrecorded'}" has no price in the prices table, so this child's spend cannot be counted; it was stopped`)
      return
    }
    tree.cost += cost
    for (const holder of active === undefined ? [] : chain(active)) {
      holder.subtree.cost += cost
      const own = holder.budget?.cost
      if (own !== undefined && holder.subtree.cost >= own) this.stop(tree, holder, 'cost', holder.subtree.cost, own, `budget: this child's cost budget of ${own} is spent (${round(holder.subtree.cost)} used by it and its children, by the prices table); it was stopped`)
    }
    if (bound === undefined || tree.spent !== undefined) return
    if (tree.cost >= bound) this.spend(tree, 'cost', tree.cost, bound, `budget: the delegation tree's cost budget of ${bound} is spent (${round(tree.cost)} used by its children, by the prices table)`)
    else this.warnIfNear(tree, 'cost', tree.cost, bound, `${round(tree.cost)} of ${bound}`)
  }

  private spend(tree: Tree, limit: BudgetLimit, used: number, bound: number, why: string): void {
    tree.spent = why
    tree.timer?.clear()
    this.host.warn(`${why}: stopping ${tree.active.size} running and ${tree.waiting} waiting children`)
    // A root that keeps running is told to finish without delegating; a given one is stopped below instead.
    if (!tree.given) this.host.tell(tree.root, `${why}. Its running children were stopped and no more will start: finish the work without delegating.`)
    this.host.event({ rootId: tree.root.id, kind: 'spent', limit, used, bound, text: why })
    for (const active of tree.active) {
      if (active.stopped !== undefined) continue
      active.stopped = `${why}; this child was stopped`
      active.run?.cancel(new StopRequest('budget', active.stopped))
    }
    // A root given its budget by a parent elsewhere is that parent's child: it stops too, as
    // the parent would stop a child of its own process, and its turn ends `budget`.
    // It stays stopped: every later turn (its client's next prompt, a notice) ends `budget`
    // as it starts, so a spent budget is never spent again by the session it bounded.
    if (tree.given) {
      const root = tree.root
      const stop = () => root.cancel(new StopRequest('budget', `${why}; this delegated session was stopped`))
      stop()
      root.session.subscribe((event) => {
        if (event.type === 'turn/start') stop()
      })
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
    const refusal = tree.spent !== undefined ? this.refusal(tree) : this.childrenRefusal(tree.members.get(request.parent.id))
    const parent = tree.members.get(request.parent.id)
    const active: Active = {
      run: undefined,
      lent: false,
      parent,
      budget: request.budget,
      limited: request.budget !== undefined || parent?.limited === true,
      inputTokens: 0,
      outputTokens: 0,
      subtree: { inputTokens: 0, outputTokens: 0, cost: 0, children: 0 },
    }
    const counts = tree.countsUsage || active.limited
    let run: SubagentRun
    try {
      if (refusal !== undefined) throw refusal
      if (request.signal.aborted) throw new SubagentError('ABORTED', 'the delegation was cancelled before its child was started', { cause: request.signal.reason })
      tree.started++
      for (let holder = parent; holder !== undefined; holder = holder.parent) holder.subtree.children++
      tree.active.add(active)
      this.startClock(tree, active)
      const handed = this.withRemaining(tree, active, request)
      run = await start(counts ? this.counted(tree, active, handed) : handed)
    } catch (error) {
      active.timer?.clear()
      tree.active.delete(active)
      this.release(slot)
      throw error
    }
    active.run = run
    // Spent while the provider started it: stopped at once.
    if (active.stopped !== undefined) run.cancel(new StopRequest('budget', active.stopped))
    if (run.local) tree.members.set(run.id, active)
    const unfollow = counts && run.local ? this.followLocal(tree, active, run.id) : undefined
    if (tree.budget?.children !== undefined && tree.spent === undefined) this.warnIfNear(tree, 'children', tree.started, tree.budget.children, `${tree.started} of ${tree.budget.children} children started`)
    const result = run.result
      .then((settled): SubagentResult => {
        // Stopped by a budget: the parent is told which, not that the child was cancelled.
        if (active.stopped === undefined || settled.stopReason === 'completed') return settled
        return { ...settled, stopReason: 'budget', diagnostic: active.stopped }
      })
      .finally(() => {
        unfollow?.()
        active.timer?.clear()
        tree.active.delete(active)
        if (tree.members.get(run.id) === active) tree.members.delete(run.id)
        this.release(slot)
      })
    return withResult(run, result)
  }

  /** Why a child of `parent` may not start for a children budget of `parent` or an ancestor, or undefined. */
  private childrenRefusal(parent: Active | undefined): SubagentError | undefined {
    for (let holder = parent; holder !== undefined; holder = holder.parent) {
      const bound = holder.budget?.children
      if (bound !== undefined && holder.subtree.children >= bound) {
        return new SubagentError('BUDGET', `budget: the delegating child's children budget of ${bound} is spent (${holder.subtree.children} started below it); finish the work without delegating`)
      }
    }
    return undefined
  }

  /** A child's wall-time budget (its own, or the least an ancestor has left): stopped when it runs out. */
  private startClock(tree: Tree, active: Active): void {
    const own = active.budget?.wallTimeMs
    const inherited = active.parent?.deadline
    const deadline = Math.min(own !== undefined ? Date.now() + own : Infinity, inherited ?? Infinity)
    if (deadline === Infinity) return
    active.deadline = deadline
    const ms = Math.max(0, deadline - Date.now())
    active.timer = timerAt(deadline, () => {
      const bound = own ?? ms
      this.stop(tree, active, 'wallTimeMs', bound, bound, `budget: this child's wall-time budget of ${seconds(bound)} is spent${own === undefined ? ' (what its delegating child had left)' : ''}; it was stopped`)
    })
  }

  /**
   * `request` with what its child may still use as its budget: the least of its own, each
   * running ancestor's left and the tree's left. A remote provider sends it in the child's
   * lineage, so the child's own process holds its descendants to it; nothing changes when
   * nothing is limited.
   */
  private withRemaining(tree: Tree, active: Active, request: SubagentRequest): SubagentRequest {
    const left = this.remainingFor(tree, active)
    return left === undefined ? request : { ...request, budget: left }
  }

  /** What `active` may still use: the least of its own budget, each running ancestor's left and the tree's left (undefined: unlimited). */
  private remainingFor(tree: Tree, active: Active): ChildBudget | undefined {
    if (tree.budget === undefined && !active.limited) return undefined
    const left: ChildBudget = {}
    const least = (limit: keyof ChildBudget, value: number | undefined) => {
      if (value === undefined) return
      const floored = limit === 'cost' ? Math.max(value, 0) : Math.max(Math.floor(value), 0)
      left[limit] = left[limit] === undefined ? floored : Math.min(left[limit]!, floored)
    }
    const budget = tree.budget
    least('outputTokens', budget?.outputTokens === undefined ? undefined : budget.outputTokens - tree.outputTokens)
    least('inputTokens', budget?.inputTokens === undefined ? undefined : budget.inputTokens - tree.inputTokens)
    least('cost', budget?.cost === undefined ? undefined : budget.cost - tree.cost)
    least('children', budget?.children === undefined ? undefined : budget.children - tree.started)
    least('wallTimeMs', tree.deadline === undefined ? undefined : tree.deadline - Date.now())
    for (const holder of chain(active)) {
      const own = holder.budget
      if (own === undefined) continue
      least('outputTokens', own.outputTokens === undefined ? undefined : own.outputTokens - holder.subtree.outputTokens)
      least('inputTokens', own.inputTokens === undefined ? undefined : own.inputTokens - holder.subtree.inputTokens)
      least('cost', own.cost === undefined ? undefined : own.cost - holder.subtree.cost)
      least('children', own.children === undefined ? undefined : own.children - holder.subtree.children)
    }
    least('wallTimeMs', active.deadline === undefined ? undefined : active.deadline - Date.now())
    return Object.keys(left).length === 0 ? undefined : left
  }

  /** `request` with a progress sink that also counts the child's usage reports (a remote child's). */
  private counted(tree: Tree, active: Active, request: SubagentRequest): SubagentRequest {
    const downstream = request.progress
    const sink: ProgressSink = {
      report: (update: SubagentProgress) => {
        if (update.kind === 'usage') {
          this.used(tree, active, update.usage)
          // A remote child's usage names no model, so it has no price: a cost budget cannot count it.
          if (active.run?.local !== true) this.charge(tree, active, { inputTokens: update.usage.inputTokens, outputTokens: update.usage.outputTokens })
        }
        downstream?.report(update)
      },
    }
    return { ...request, progress: sink }
  }

  /** Count an in-process child's usage from its own session, as each model call lands. */
  private followLocal(tree: Tree, active: Active | undefined, id: string): (() => void) | undefined {
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
      tree.root = root
      // A remote child's root carries what its parent's tree left it (its lineage's budget).
      const given = root.session.header.budget
      tree.given = given !== undefined
      tree.budget = intersect(this.budget, given)
      tree.countsUsage = tree.budget?.outputTokens !== undefined || tree.budget?.inputTokens !== undefined || tree.budget?.cost !== undefined
      const wallTimeMs = tree.budget?.wallTimeMs
      if (wallTimeMs !== undefined) {
        // A given budget's clock started when the child was: its session's creation.
        const since = given?.wallTimeMs !== undefined ? Date.parse(root.session.header.createdAt) || Date.now() : Date.now()
        tree.deadline = since + wallTimeMs
        const started = tree
        tree.timer = timerAt(tree.deadline, () => {
          // A tree whose root is gone has nothing left to stop or tell.
          if (started.spent !== undefined || root.status === 'disposing' || root.status === 'disposed') return
          this.spend(started, 'wallTimeMs', wallTimeMs, wallTimeMs, `budget: the delegation tree's wall-time budget of ${seconds(wallTimeMs)} is spent`)
        })
      }
      // What it was given covers the root's own model calls too, as its parent counted them.
      if (given !== undefined && tree.countsUsage) tree.unfollowRoot = this.followLocal(tree, undefined, root.id)
      this.trees.set(root, tree)
    }
    return tree
  }

  /** Start bounding `root`'s tree now (its budget, its own model calls, its wall-time clock). */
  track(root: Agent): void {
    this.treeOf(root)
  }

  /**
   * Admit a continuable child of `parent` under the tree's budget, or throw why not (the
   * tree's budget is spent, or a children budget of the parent or an ancestor). It counts
   * as a child started at once. Returns the budget to hand it (its own `budget`, bounded by
   * what its ancestors and the tree have left: a remote child's lineage carries it) and
   * `adopt`, called once it started, with its agent when it runs in this process (then its
   * model calls are followed and a spent budget stops its running turn: `budget`), or with
   * nothing when it runs elsewhere or failed to start (its own process bounds a remote one).
   * An adopted child holds no slot of the cap (it is idle between turns, and a cap held
   * while idle would starve the tree), so it has none to lend its own children.
   */
  admitContinuable(parent: Agent, budget: ChildBudget | undefined): ContinuableAdmission {
    const tree = this.treeOf(parent)
    const holder = tree.members.get(parent.id)
    const refusal = this.refusal(tree) ?? this.childrenRefusal(holder)
    if (refusal !== undefined) throw refusal
    const active: Active = {
      run: undefined,
      lent: true,
      parent: holder,
      budget,
      limited: budget !== undefined || holder?.limited === true,
      inputTokens: 0,
      outputTokens: 0,
      subtree: { inputTokens: 0, outputTokens: 0, cost: 0, children: 0 },
    }
    tree.started++
    for (let above = holder; above !== undefined; above = above.parent) above.subtree.children++
    this.startClock(tree, active)
    const handed = this.remainingFor(tree, active)
    const adopt = (child: Agent | undefined): (() => void) => {
      if (child === undefined) {
        active.timer?.clear()
        return () => {}
      }
      active.run = { id: child.id, local: true, result: new Promise(() => {}), cancel: (reason) => child.cancel(reason), dispose: async () => {} }
      tree.active.add(active)
      tree.members.set(child.id, active)
      const stopped = tree.spent !== undefined ? `${tree.spent}; this child was stopped` : active.stopped
      if (stopped !== undefined) {
        active.stopped ??= stopped
        child.cancel(new StopRequest('budget', stopped))
      }
      const unfollow = tree.countsUsage || active.limited ? this.followLocal(tree, active, child.id) : undefined
      // Called when the child is disposed (the service's clean-up hook of ctx.agents).
      return () => {
        unfollow?.()
        active.timer?.clear()
        tree.active.delete(active)
        if (tree.members.get(child.id) === active) tree.members.delete(child.id)
      }
    }
    return { budget: handed, adopt }
  }

  /**
   * Throw why continuable child `childId` of `parent` may not take another turn: its tree's
   * budget is spent, or its own (or an ancestor's) stopped it. A stopped child stays stopped.
   */
  refuseFollowup(parent: Agent, childId: string): void {
    const tree = this.treeOf(parent)
    if (tree.spent !== undefined) throw new SubagentError('BUDGET', `${tree.spent}; its children take no more turns: finish the work without them`)
    for (let holder = tree.members.get(childId); holder !== undefined; holder = holder.parent) {
      if (holder.stopped !== undefined) throw new SubagentError('BUDGET', `${holder.stopped}; it takes no more turns`)
    }
  }

  /** Whether `agent`'s tree has a budget of its own (from its root's lineage): the gate must follow it even without config. */
  static givenBudget(agent: Agent): ChildBudget | undefined {
    return rootOf(agent).session.header.budget
  }
}

/** What `admitContinuable` gives back: the budget to hand the child, and how to adopt it once started. */
export interface ContinuableAdmission {
  budget: ChildBudget | undefined
  adopt(child: Agent | undefined): () => void
}

/** A timer that can be cleared. */
interface Timer {
  clear(): void
}

/** Node's timers fire at once past this many ms (with a warning), so longer ones are re-armed in steps. */
const MAX_TIMER_MS = 2 ** 31 - 1

/**
 * Call `fire` at `deadline` (ms since the epoch), never sooner, however far away it is; the
 * timer does not keep the process alive.
 */
function timerAt(deadline: number, fire: () => void): Timer {
  let timer: ReturnType<typeof setTimeout> | undefined
  const arm = (ms: number) => {
    timer = setTimeout(() => {
      const left = deadline - Date.now()
      if (left > 0) arm(left)
      else fire()
    }, Math.min(Math.max(0, ms), MAX_TIMER_MS))
    timer.unref?.()
  }
  arm(deadline - Date.now())
  return { clear: () => clearTimeout(timer) }
}

/** The least of two budgets, limit by limit (undefined when neither has any). */
function intersect(configured: TreeBudget | undefined, given: ChildBudget | undefined): TreeBudget | undefined {
  if (given === undefined) return configured
  const both: TreeBudget = { ...configured }
  for (const limit of ['outputTokens', 'inputTokens', 'cost', 'children', 'wallTimeMs'] as const) {
    const theirs = given[limit]
    if (theirs !== undefined) both[limit] = both[limit] === undefined ? theirs : Math.min(both[limit]!, theirs)
  }
  return both
}

/** `active` and each running ancestor of it in the tree. */
function chain(active: Active): Active[] {
  const holders: Active[] = []
  for (let holder: Active | undefined = active; holder !== undefined; holder = holder.parent) holders.push(holder)
  return holders
}

function seconds(ms: number): string {
  return ms >= 10_000 ? `${Math.round(ms / 1000)} s` : `${(ms / 1000).toFixed(1)} s`
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
