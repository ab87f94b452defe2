/**
 * Budget accounting for the tree gate (`tree-limits.ts`): a tree's budget of tokens, cost,
 * children started and wall time, and each child's own budget (`request.budget`) over it
 * and its descendants. Usage reaches it already turned into what each report adds
 * (`tree-usage.ts`). Every limit is spent on reaching it: the children budget lets that
 * many start and refuses the next; a token or cost count equal to its bound spends it.
 * A spent tree budget stops every running child, refuses every waiting one and lets no
 * more start; a spent child budget stops that child (and what runs below it). A child
 * stopped by a budget is cancelled with a `StopRequest('budget', why)`. Loaded with the
 * gate, only when limits are in use.
 */
import { StopRequest } from '@dsh/base'
import type { Agent } from '@dsh/agent'
import { costOf, type PriceTable, type Usage } from '@dsh/llm'
import { SubagentError } from './errors.js'
import type { ChildBudget, SubagentRun } from './types.js'
import type { TokenCount } from './tree-usage.js'

/** What one tree's children may spend together: their summed usage, counted as it happens, and how many start. */
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

/** What the budgets need of their service. */
export interface BudgetHost {
  /** A line for the log (a budget spent). */
  warn(message: string): void
  /** `ctx.llm`'s price table (empty when none is configured). */
  prices(): PriceTable
  /** Tell the tree's root agent (its model reads it at its next step): a warning, a spent budget. */
  tell(root: Agent, text: string): void
  /** Announce a budget event (the live tree, `--json`). */
  event(event: BudgetEvent): void
}

/** The default fraction of a limit at which the root is warned. */
export const DEFAULT_WARN_AT = 0.8

type TokenLimit = 'outputTokens' | 'inputTokens'
const TOKEN_WORDS: Record<TokenLimit, string> = { outputTokens: 'output-token', inputTokens: 'input-token' }
const SPENT_WORDS: Record<TokenLimit, string> = { outputTokens: 'output tokens', inputTokens: 'input tokens' }
const LIMIT_WORDS: Record<BudgetLimit, string> = { outputTokens: 'output-token', inputTokens: 'input-token', cost: 'cost', children: 'children', wallTimeMs: 'wall-time' }

/** A timer that can be cleared. */
export interface Timer {
  clear(): void
}

/** One running child of a tree, local or remote: what it has used and how to stop it. */
export interface ChildAccount extends TokenCount {
  run: SubagentRun | undefined
  /** Its delegating parent, when that is a running child of the tree too (not the root). */
  parent: ChildAccount | undefined
  /** Its own budget (`request.budget`), covering it and its descendants. */
  budget: ChildBudget | undefined
  /** Whether it or an ancestor has a budget: then its usage is followed even without a tree budget. */
  limited: boolean
  /** What it and its descendants have used together (its own usage, `inputTokens`/`outputTokens`, is the latest cumulative figures counted). */
  subtree: { inputTokens: number; outputTokens: number; cost: number; children: number }
  /** When its own wall-time budget (or an ancestor's) runs out, in ms since the epoch. */
  deadline?: number
  /** Stops it at `deadline`. */
  timer?: Timer
  /** Why a budget stopped it, once one did: its result then ends `budget` with this. */
  stopped?: string
}

/** A fresh account for a child of `parent` (undefined: of the tree's root) with its own `budget`. */
export function childAccount(parent: ChildAccount | undefined, budget: ChildBudget | undefined): ChildAccount {
  return {
    run: undefined,
    parent,
    budget,
    limited: budget !== undefined || parent?.limited === true,
    inputTokens: 0,
    outputTokens: 0,
    subtree: { inputTokens: 0, outputTokens: 0, cost: 0, children: 0 },
  }
}

/** The children of a tree waiting for a slot (`tree-slots.ts`): a spent budget refuses them. */
export interface Waiters {
  readonly waiting: number
  refuseAll(error: Error): void
}

/** One tree's account: its budget and what its children have used and started. */
export class TreeAccount {
  /** Children started, at any depth. */
  started = 0
  /** What the tree's children have used together. */
  inputTokens = 0
  outputTokens = 0
  cost = 0
  /** Set once the budget is spent: why, in words for the parent's model. */
  spent: string | undefined
  /** Whether its usage must be followed (a token or cost limit). */
  readonly countsUsage: boolean
  /** When the wall-time budget runs out, and the timer that spends it then. */
  deadline: number | undefined
  timer: Timer | undefined
  /** Limits the root was warned about already (`warnAt`). */
  readonly warned = new Set<BudgetLimit>()
  /** Stops following the root's own usage (a remote child's tree counts its root too). */
  unfollowRoot: (() => void) | undefined
  /** What the root's own model calls used, when they are counted. */
  readonly rootCount: TokenCount = { inputTokens: 0, outputTokens: 0 }
  /** Its running children. */
  readonly active = new Set<ChildAccount>()

  constructor(
    /** The tree's root. */
    readonly root: Agent,
    /** This tree's budget: the configured one, and what the root's own lineage allows (a remote child's tree). */
    readonly budget: TreeBudget | undefined,
    /** Its budget came from its root's lineage: the root is a remote child, bounded with its tree. */
    readonly given: boolean,
    readonly waiters: Waiters,
  ) {
    this.countsUsage = budget?.outputTokens !== undefined || budget?.inputTokens !== undefined || budget?.cost !== undefined
  }
}

/** The budgets of one gate's trees and their children. */
export class BudgetBook {
  /** The configured budget of every tree (a remote child's tree may have a smaller one, from its lineage); undefined when it limits nothing. */
  readonly configured: TreeBudget | undefined

  constructor(
    budget: TreeBudget | undefined,
    private readonly host: BudgetHost,
  ) {
    this.configured = budget !== undefined && Object.entries(budget).some(([key, limit]) => key !== 'warnAt' && limit !== undefined) ? budget : undefined
  }

  /** The account of the tree rooted at `root`, its wall-time clock started (from its session's creation for a given budget). */
  open(root: Agent, waiters: Waiters): TreeAccount {
    // A remote child's root carries what its parent's tree left it (its lineage's budget).
    const given = root.session.header.budget
    const tree = new TreeAccount(root, intersect(this.configured, given), given !== undefined, waiters)
    const wallTimeMs = tree.budget?.wallTimeMs
    if (wallTimeMs !== undefined) {
      // A given budget's clock started when the child was: its session's creation.
      const since = given?.wallTimeMs !== undefined ? Date.parse(root.session.header.createdAt) || Date.now() : Date.now()
      tree.deadline = since + wallTimeMs
      tree.timer = timerAt(tree.deadline, () => {
        // A tree whose root is gone has nothing left to stop or tell.
        if (tree.spent !== undefined || root.status === 'disposing' || root.status === 'disposed') return
        this.spend(tree, 'wallTimeMs', wallTimeMs, wallTimeMs, `budget: the delegation tree's wall-time budget of ${seconds(wallTimeMs)} is spent`)
      })
    }
    return tree
  }

  /** Why the budget lets no more children of `tree` start, or undefined. */
  refusal(tree: TreeAccount): SubagentError | undefined {
    if (tree.spent !== undefined) return new SubagentError('BUDGET', `${tree.spent}; no more children start in this tree: finish the work without delegating`)
    if (tree.budget?.cost !== undefined && Object.keys(this.host.prices()).length === 0) {
      return new SubagentError('INVALID_CONFIG', `tree.budget.cost (${tree.budget.cost}) needs a price table: set prices in the llm service's config (model spec → { input, output } per million tokens)`)
    }
    const children = tree.budget?.children
    const waiting = tree.waiters.waiting
    // Children queued now will start later: they count already.
    if (children !== undefined && tree.started + waiting >= children) {
      return new SubagentError('BUDGET', `budget: the delegation tree's children budget of ${children} is spent (${tree.started} started${waiting ? `, ${waiting} waiting` : ''}); finish the work without delegating`)
    }
    return undefined
  }

  /** Why a child of `parent` may not start for a children budget of `parent` or an ancestor, or undefined. */
  childrenRefusal(parent: ChildAccount | undefined): SubagentError | undefined {
    for (let holder = parent; holder !== undefined; holder = holder.parent) {
      const bound = holder.budget?.children
      if (bound !== undefined && holder.subtree.children >= bound) {
        return new SubagentError('BUDGET', `budget: the delegating child's children budget of ${bound} is spent (${holder.subtree.children} started below it); finish the work without delegating`)
      }
    }
    return undefined
  }

  /** Count one child of `parent` (undefined: of the root) started in `tree`, at every level that has it below. */
  countStart(tree: TreeAccount, parent: ChildAccount | undefined): void {
    tree.started++
    for (let holder = parent; holder !== undefined; holder = holder.parent) holder.subtree.children++
  }

  /** Warn the root when the children started reach the `warnAt` fraction of its children budget. */
  warnOfChildren(tree: TreeAccount): void {
    const bound = tree.budget?.children
    if (bound !== undefined && tree.spent === undefined) this.warnIfNear(tree, 'children', tree.started, bound, `${tree.started} of ${bound} children started`)
  }

  /**
   * Add `added` tokens, used by `account` (undefined: by the tree's root), to it, each
   * ancestor and the tree: a child budget reached stops its holder, the tree's reached is
   * spent.
   */
  addTokens(tree: TreeAccount, account: ChildAccount | undefined, added: TokenCount): void {
    tree.inputTokens += added.inputTokens
    tree.outputTokens += added.outputTokens
    // A child's own budget covers its descendants: each ancestor with one is checked.
    for (let holder = account; holder !== undefined; holder = holder.parent) {
      holder.subtree.inputTokens += added.inputTokens
      holder.subtree.outputTokens += added.outputTokens
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

  /** Charge one model call of `account` (undefined: the root's own) against the cost budgets, by the price table. */
  charge(tree: TreeAccount, account: ChildAccount | undefined, usage: Usage): void {
    const bound = tree.budget?.cost
    const limited = account !== undefined && chain(account).some((holder) => holder.budget?.cost !== undefined)
    if (bound === undefined && !limited) return
    const cost = costOf(usage, this.host.prices())
    if (cost === undefined) {
      if (account === undefined || account.stopped !== undefined) return
      // Unpriced spend cannot be bounded: stopping is the only answer that grants nothing.
      const whose = bound !== undefined ? `the delegation tree has a cost budget of ${bound}` : 'this child has a cost budget'
      this.stop(tree, account, 'cost', 0, bound ?? 0, `budget: ${whose}, but model "${usage.model ?? 'unrecorded'}" has no price in the prices table, so this child's spend cannot be counted; it was stopped`)
      return
    }
    tree.cost += cost
    for (const holder of account === undefined ? [] : chain(account)) {
      holder.subtree.cost += cost
      const own = holder.budget?.cost
      if (own !== undefined && holder.subtree.cost >= own) this.stop(tree, holder, 'cost', holder.subtree.cost, own, `budget: this child's cost budget of ${own} is spent (${round(holder.subtree.cost)} used by it and its children, by the prices table); it was stopped`)
    }
    if (bound === undefined || tree.spent !== undefined) return
    if (tree.cost >= bound) this.spend(tree, 'cost', tree.cost, bound, `budget: the delegation tree's cost budget of ${bound} is spent (${round(tree.cost)} used by its children, by the prices table)`)
    else this.warnIfNear(tree, 'cost', tree.cost, bound, `${round(tree.cost)} of ${bound}`)
  }

  /** A child's wall-time budget (its own, or the least an ancestor has left): stopped when it runs out. */
  startClock(tree: TreeAccount, account: ChildAccount): void {
    const own = account.budget?.wallTimeMs
    const inherited = account.parent?.deadline
    const deadline = Math.min(own !== undefined ? Date.now() + own : Infinity, inherited ?? Infinity)
    if (deadline === Infinity) return
    account.deadline = deadline
    const ms = Math.max(0, deadline - Date.now())
    account.timer = timerAt(deadline, () => {
      const bound = own ?? ms
      this.stop(tree, account, 'wallTimeMs', bound, bound, `budget: this child's wall-time budget of ${seconds(bound)} is spent${own === undefined ? ' (what its delegating child had left)' : ''}; it was stopped`)
    })
  }

  /** What `account` may still use: the least of its own budget, each running ancestor's left and the tree's left (undefined: unlimited). */
  remainingFor(tree: TreeAccount, account: ChildAccount): ChildBudget | undefined {
    if (tree.budget === undefined && !account.limited) return undefined
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
    for (const holder of chain(account)) {
      const own = holder.budget
      if (own === undefined) continue
      least('outputTokens', own.outputTokens === undefined ? undefined : own.outputTokens - holder.subtree.outputTokens)
      least('inputTokens', own.inputTokens === undefined ? undefined : own.inputTokens - holder.subtree.inputTokens)
      least('cost', own.cost === undefined ? undefined : own.cost - holder.subtree.cost)
      least('children', own.children === undefined ? undefined : own.children - holder.subtree.children)
    }
    least('wallTimeMs', account.deadline === undefined ? undefined : account.deadline - Date.now())
    return Object.keys(left).length === 0 ? undefined : left
  }

  /** Stop one child (and what runs below it) for its own budget: it ends `budget`, saying why. */
  private stop(tree: TreeAccount, account: ChildAccount, limit: BudgetLimit, used: number, bound: number, why: string): void {
    if (account.stopped !== undefined) return
    account.stopped = why
    this.host.warn(why)
    account.run?.cancel(new StopRequest('budget', why))
    const childId = account.run?.id
    this.host.event({ rootId: tree.root.id, kind: 'stopped', limit, used, bound, text: why, ...(childId !== undefined && { childId }) })
  }

  /** Warn the root once per limit when its use reaches the `warnAt` fraction of it. */
  private warnIfNear(tree: TreeAccount, limit: BudgetLimit, used: number, bound: number, usedText: string): void {
    if (tree.warned.has(limit)) return
    const fraction = tree.budget?.warnAt ?? DEFAULT_WARN_AT
    if (used < fraction * bound) return
    tree.warned.add(limit)
    const text = `budget warning: the delegation tree has used ${Math.round((used / bound) * 100)}% of its ${LIMIT_WORDS[limit]} budget (${usedText}); at the limit its running children are stopped and no more start`
    this.host.warn(text)
    this.host.tell(tree.root, text)
    this.host.event({ rootId: tree.root.id, kind: 'warning', limit, used, bound, text })
  }

  /** Spend the tree's budget: every running child is stopped, every waiting one refused, and no more start. */
  private spend(tree: TreeAccount, limit: BudgetLimit, used: number, bound: number, why: string): void {
    tree.spent = why
    tree.timer?.clear()
    this.host.warn(`${why}: stopping ${tree.active.size} running and ${tree.waiters.waiting} waiting children`)
    // A root that keeps running is told to finish without delegating; a given one is stopped below instead.
    if (!tree.given) this.host.tell(tree.root, `${why}. Its running children were stopped and no more will start: finish the work without delegating.`)
    this.host.event({ rootId: tree.root.id, kind: 'spent', limit, used, bound, text: why })
    for (const account of tree.active) {
      if (account.stopped !== undefined) continue
      account.stopped = `${why}; this child was stopped`
      account.run?.cancel(new StopRequest('budget', account.stopped))
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
    tree.waiters.refuseAll(new SubagentError('BUDGET', `${why}; no more children start in this tree: finish the work without delegating`))
  }
}

/** Node's timers fire at once past this many ms (with a warning), so longer ones are re-armed in steps. */
const MAX_TIMER_MS = 2 ** 31 - 1

/**
 * Call `fire` at `deadline` (ms since the epoch), never sooner, however far away it is; the
 * timer does not keep the process alive.
 */
export function timerAt(deadline: number, fire: () => void): Timer {
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

/** `account` and each running ancestor of it in the tree. */
function chain(account: ChildAccount): ChildAccount[] {
  const holders: ChildAccount[] = []
  for (let holder: ChildAccount | undefined = account; holder !== undefined; holder = holder.parent) holders.push(holder)
  return holders
}

function seconds(ms: number): string {
  return ms >= 10_000 ? `${Math.round(ms / 1000)} s` : `${(ms / 1000).toFixed(1)} s`
}

/** A cost for a person: four significant digits. */
function round(cost: number): string {
  return String(Number(cost.toPrecision(4)))
}
