/**
 * Limits on a whole delegation tree (a root agent and every in-process descendant): a cap
 * on the children that run at once (in all, and per provider), with one bounded FIFO queue
 * for the rest, and a budget of tokens, cost and children started; and each child's own
 * budget (`request.budget`) over it and its descendants. Loaded only when `ctx.subagents`
 * is configured with `tree` limits or a request carries a budget; otherwise no child pays
 * for any of this.
 *
 * `TreeGate` joins three parts, each in its own module: the slots and their queue, with
 * lending (`tree-slots.ts`), the budgets' accounting (`tree-budget.ts`), and how usage is
 * followed into them (`tree-usage.ts`).
 *
 * The one place a delegation waits for a slot: `SubagentService.start`, after `admit()`
 * and before the provider is asked for anything, so a queued child has nothing yet (no
 * session, no process) and cancelling it (its request's signal) just takes it out.
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
import type { Session } from '@dsh/session'
import { SubagentError } from './errors.js'
import type { ChildBudget, ProgressSink, SubagentRequest, SubagentResult, SubagentRun, SubagentUsage } from './types.js'
import { wrapRun } from './run-wrap.js'
import { BudgetBook, childAccount, type BudgetHost, type ChildAccount, type TreeAccount, type TreeBudget } from './tree-budget.js'
import { TreeSlots, type Lender, type Slot, type SlotCaps } from './tree-slots.js'
import { advance, countingSink, followSession } from './tree-usage.js'

export { DEFAULT_WARN_AT, type BudgetEvent, type BudgetLimit, type TreeBudget } from './tree-budget.js'

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

/** What the gate needs of its service. */
export interface TreeGateHost extends BudgetHost {
  /** The session of in-process child `id` while it is live: where its usage is read as it happens. */
  sessionOf(id: string): Session | undefined
  /** Announce that `request` waits for a slot (`true`), or no longer does (`false`: it starts, or was cancelled or refused). */
  queued(request: SubagentRequest, provider: string, waiting: boolean): void
}

/**
 * What the gate hands on for the provider's request (`start`'s callback): what the child may
 * still use (the least of its own budget, each running ancestor's left and the tree's left),
 * when anything is limited, and a tap that counts its progress's usage reports, when its
 * usage is followed that way. The service puts them into the request it gives the provider.
 */
export interface GateHanded {
  budget?: ChildBudget
  countUsage?: (downstream: ProgressSink | undefined) => ProgressSink
}

/** The queue's bound where the config sets none. */
export const DEFAULT_MAX_QUEUED = 1000

/** One running child of a tree, local or remote: its account, and its slot to lend. */
interface Active extends ChildAccount, Lender {}

interface Tree {
  readonly account: TreeAccount
  readonly slots: TreeSlots
  /** Running in-process children by agent id: a parent that holds a slot can lend it, and its budget covers its children. */
  readonly members: Map<string, Active>
}

/**
 * The trees of one `ctx.subagents`, each found from any of its agents by walking `parent`
 * up to the root (an in-process child's parent is its delegating agent). Held weakly by
 * the root agent, so a tree is forgotten with it.
 */
export class TreeGate {
  private readonly trees = new WeakMap<Agent, Tree>()
  private readonly caps: SlotCaps
  private readonly budgets: BudgetBook

  constructor(
    config: TreeLimitsConfig,
    private readonly host: TreeGateHost,
  ) {
    this.caps = { maxConcurrent: config.maxConcurrent, maxQueued: config.maxQueued ?? DEFAULT_MAX_QUEUED, perProvider: new Map(Object.entries(config.maxConcurrentPerProvider ?? {})) }
    this.budgets = new BudgetBook(config.budget, host)
  }

  /**
   * Start `request` through `start` once its tree has a slot: at once when one is free,
   * else after the children queued before it. `onWait(true)` is called (synchronously,
   * before this returns) when it has to wait and `onWait(false)` when it leaves the queue.
   * Rejects `QUEUE_FULL` beyond the queue's bound and `ABORTED` when the request's signal
   * aborts while it waits (nothing was started).
   */
  start(provider: string, request: SubagentRequest, start: (handed: GateHanded) => Promise<SubagentRun>): Promise<SubagentRun> {
    const tree = this.treeOf(request.parent)
    const refusal = this.budgets.refusal(tree.account)
    if (refusal !== undefined) return Promise.reject(refusal)
    // A free slot means nobody waiting could use it (each release serves the queue first), so
    // taking it jumps no queue: the waiters are all held by their provider's cap.
    const slot = tree.slots.take(provider) ?? tree.slots.lend(tree.members.get(request.parent.id), provider)
    if (slot !== undefined) return this.run(tree, slot, request, start)
    // Cancelled already: it would wait for a slot only to be refused then.
    if (request.signal.aborted) return Promise.reject(new SubagentError('ABORTED', 'the delegation was cancelled before its child was started', { cause: request.signal.reason }))
    if (tree.slots.full) return Promise.reject(tree.slots.queueFull(tree.account.root.id, provider))
    const announce = (waiting: boolean) => {
      request.onWait?.(waiting)
      this.host.queued(request, provider, waiting)
    }
    return tree.slots.wait(provider, request.signal, announce).then((slot) => this.run(tree, slot, request, start))
  }

  /** Start the provider on a slot already held; the slot is released when the run's result settles. */
  private async run(tree: Tree, slot: Slot, request: SubagentRequest, start: (handed: GateHanded) => Promise<SubagentRun>): Promise<SubagentRun> {
    const { account, slots } = tree
    const parent = tree.members.get(request.parent.id)
    // Spent while this child waited (its waiter was failed) or a moment ago: nothing starts.
    const refusal = account.spent !== undefined ? this.budgets.refusal(account) : this.budgets.childrenRefusal(parent)
    const active: Active = { ...childAccount(parent, request.budget), lent: false }
    const counts = account.countsUsage || active.limited
    let run: SubagentRun
    try {
      if (refusal !== undefined) throw refusal
      if (request.signal.aborted) throw new SubagentError('ABORTED', 'the delegation was cancelled before its child was started', { cause: request.signal.reason })
      this.budgets.countStart(account, parent)
      account.active.add(active)
      this.budgets.startClock(account, active)
      // What it may still use goes with it: a remote provider sends it in the child's lineage,
      // so the child's own process holds its descendants to it.
      const handed: GateHanded = {}
      const left = this.budgets.remainingFor(account, active)
      if (left !== undefined) handed.budget = left
      if (counts) handed.countUsage = (downstream) => this.counted(tree, active, downstream)
      run = await start(handed)
    } catch (error) {
      active.timer?.clear()
      account.active.delete(active)
      slots.release(slot)
      throw error
    }
    active.run = run
    // Spent while the provider started it: stopped at once.
    if (active.stopped !== undefined) run.cancel(new StopRequest('budget', active.stopped))
    if (run.local) tree.members.set(run.id, active)
    const unfollow = counts && run.local ? this.followLocal(tree, active, run.id) : undefined
    this.budgets.warnOfChildren(account)
    const result = run.result
      .then((settled): SubagentResult => {
        // Stopped by a budget: the parent is told which, not that the child was cancelled.
        if (active.stopped === undefined || settled.stopReason === 'completed') return settled
        return { ...settled, stopReason: 'budget', diagnostic: active.stopped }
      })
      .finally(() => {
        unfollow?.()
        active.timer?.clear()
        account.active.delete(active)
        if (tree.members.get(run.id) === active) tree.members.delete(run.id)
        slots.release(slot)
      })
    return wrapRun(run, { result })
  }

  /** A progress sink that counts the child's usage reports (a remote child's), then passes every update on to `downstream`. */
  private counted(tree: Tree, active: Active, downstream: ProgressSink | undefined): ProgressSink {
    return countingSink(downstream, (usage) => {
      this.used(tree, active, usage)
      // A remote child's usage names no model, so it has no price: a cost budget cannot count it.
      if (active.run?.local !== true) this.budgets.charge(tree.account, active, { inputTokens: usage.inputTokens, outputTokens: usage.outputTokens })
    })
  }

  /** Count `usage` (cumulative) of one child (undefined: the root's own) against its budgets. */
  private used(tree: Tree, active: Active | undefined, usage: SubagentUsage): void {
    // Figures only grow: a smaller one (a transport that restarted its count) grants nothing back.
    const added = advance(active ?? tree.account.rootCount, usage)
    if (added !== undefined) this.budgets.addTokens(tree.account, active, added)
  }

  /** Count an in-process child's usage from its own session, as each model call lands. */
  private followLocal(tree: Tree, active: Active | undefined, id: string): (() => void) | undefined {
    const session = this.host.sessionOf(id)
    if (session === undefined) return undefined
    return followSession(session, (total, call) => {
      this.used(tree, active, total)
      this.budgets.charge(tree.account, active, call)
    })
  }

  private treeOf(agent: Agent): Tree {
    const root = agent.root
    let tree = this.trees.get(root)
    if (tree === undefined) {
      const slots = new TreeSlots(this.caps)
      tree = { account: this.budgets.open(root, slots), slots, members: new Map() }
      // What it was given covers the root's own model calls too, as its parent counted them.
      if (tree.account.given && tree.account.countsUsage) tree.account.unfollowRoot = this.followLocal(tree, undefined, root.id)
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
    const { account } = tree
    const holder = tree.members.get(parent.id)
    const refusal = this.budgets.refusal(account) ?? this.budgets.childrenRefusal(holder)
    if (refusal !== undefined) throw refusal
    const active: Active = { ...childAccount(holder, budget), lent: true }
    this.budgets.countStart(account, holder)
    this.budgets.startClock(account, active)
    const handed = this.budgets.remainingFor(account, active)
    const adopt = (child: Agent | undefined): (() => void) => {
      if (child === undefined) {
        active.timer?.clear()
        return () => {}
      }
      active.run = { id: child.id, local: true, result: new Promise(() => {}), cancel: (reason) => child.cancel(reason), dispose: async () => {} }
      account.active.add(active)
      tree.members.set(child.id, active)
      const stopped = account.spent !== undefined ? `${account.spent}; this child was stopped` : active.stopped
      if (stopped !== undefined) {
        active.stopped ??= stopped
        child.cancel(new StopRequest('budget', stopped))
      }
      const unfollow = account.countsUsage || active.limited ? this.followLocal(tree, active, child.id) : undefined
      // Called when the child is disposed (the service's clean-up hook of ctx.agents).
      return () => {
        unfollow?.()
        active.timer?.clear()
        account.active.delete(active)
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
    if (tree.account.spent !== undefined) throw new SubagentError('BUDGET', `${tree.account.spent}; its children take no more turns: finish the work without them`)
    for (let holder: ChildAccount | undefined = tree.members.get(childId); holder !== undefined; holder = holder.parent) {
      if (holder.stopped !== undefined) throw new SubagentError('BUDGET', `${holder.stopped}; it takes no more turns`)
    }
  }

  /** Whether `agent`'s tree has a budget of its own (from its root's lineage): the gate must follow it even without config. */
  static givenBudget(agent: Agent): ChildBudget | undefined {
    return agent.root.session.header.budget
  }
}

/** What `admitContinuable` gives back: the budget to hand the child, and how to adopt it once started. */
export interface ContinuableAdmission {
  budget: ChildBudget | undefined
  adopt(child: Agent | undefined): () => void
}
