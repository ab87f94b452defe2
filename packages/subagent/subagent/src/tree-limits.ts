/**
 * Limits on a whole delegation tree (a root agent and every in-process descendant): a cap
 * on the children that run at once, with one bounded FIFO queue for the rest, and a budget
 * of tokens and children started. Loaded only when `ctx.subagents` is configured with
 * `tree` limits; without them no child pays for any of this.
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
import { SubagentError } from './errors.js'
import type { SubagentRequest, SubagentResult, SubagentRun } from './types.js'

/** `tree` in `ctx.subagents`' config. */
export interface TreeLimitsConfig {
  /** Most children of one tree (any depth) running at once; more wait in the queue. */
  maxConcurrent?: number
  /** Most children of one tree waiting for a slot; beyond it a delegation is refused. */
  maxQueued?: number
}

/** The queue's bound where the config sets none. */
export const DEFAULT_MAX_QUEUED = 1000

interface Waiter {
  grant: (slot: Slot) => void
  fail: (error: Error) => void
  /** Set once granted, failed or cancelled: a settled waiter left in the queue is skipped. */
  done: boolean
}

/** A running child's hold on its tree. */
interface Slot {
  tree: Tree
  /** The member whose slot this is on loan from (the parent), or undefined for a slot of the tree's own. */
  lender: Member | undefined
}

/** What the tree knows of one of its running children. */
interface Member {
  slot: Slot
  /** Whether this child's slot is on loan to one of its own children. */
  lent: boolean
}

class Tree {
  running = 0
  /** FIFO; `head` is the next to be served, so a long queue is not shifted on every grant. */
  queue: Waiter[] = []
  head = 0
  /** Running in-process children by agent id: a parent that holds a slot can lend it. */
  readonly members = new Map<string, Member>()

  get waiting(): number {
    return this.queue.length - this.head
  }
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

  constructor(config: TreeLimitsConfig) {
    this.maxConcurrent = config.maxConcurrent
    this.maxQueued = config.maxQueued ?? DEFAULT_MAX_QUEUED
  }

  /**
   * Start `request` through `start` once its tree has a slot: at once when one is free,
   * else after the children queued before it. `onWait(true)` is called (synchronously,
   * before this returns) when it has to wait and `onWait(false)` when it leaves the queue.
   * Rejects `QUEUE_FULL` beyond the queue's bound and `ABORTED` when the request's signal
   * aborts while it waits (nothing was started).
   */
  start(request: SubagentRequest, start: (request: SubagentRequest) => Promise<SubagentRun>): Promise<SubagentRun> {
    const tree = this.treeOf(request.parent)
    const slot = this.take(tree, request.parent)
    if (slot !== undefined) return this.run(slot, request, start)
    if (tree.waiting >= this.maxQueued) {
      return Promise.reject(
        new SubagentError(
          'QUEUE_FULL',
          `the delegation tree of ${rootOf(request.parent).id} has ${tree.running} children running (maxConcurrent ${this.maxConcurrent}) and ${tree.waiting} waiting, the most allowed (maxQueued ${this.maxQueued}); wait for some to finish before delegating more`,
        ),
      )
    }
    return new Promise<Slot>((resolve, reject) => {
      const { signal } = request
      const onAbort = () => {
        if (waiter.done) return
        waiter.done = true
        request.onWait?.(false)
        reject(new SubagentError('ABORTED', 'the delegation was cancelled while it waited for a slot; it was never started', { cause: signal.reason }))
      }
      const waiter: Waiter = {
        done: false,
        grant: (slot) => {
          waiter.done = true
          signal.removeEventListener('abort', onAbort)
          request.onWait?.(false)
          resolve(slot)
        },
        fail: (error) => {
          waiter.done = true
          signal.removeEventListener('abort', onAbort)
          request.onWait?.(false)
          reject(error)
        },
      }
      tree.queue.push(waiter)
      signal.addEventListener('abort', onAbort, { once: true })
      request.onWait?.(true)
    }).then((slot) => this.run(slot, request, start))
  }

  /** A slot for a child of `parent` now, or undefined when it must wait. */
  private take(tree: Tree, parent: Agent): Slot | undefined {
    if (this.maxConcurrent === undefined || tree.running < this.maxConcurrent) {
      tree.running++
      return { tree, lender: undefined }
    }
    const lender = tree.members.get(parent.id)
    if (lender !== undefined && !lender.lent) {
      lender.lent = true
      return { tree, lender }
    }
    return undefined
  }

  /** Give `slot` back: to its lender, or to the first child still waiting, or to the tree. */
  private release(slot: Slot): void {
    const { tree } = slot
    if (slot.lender !== undefined) {
      slot.lender.lent = false
      return
    }
    while (tree.head < tree.queue.length) {
      const waiter = tree.queue[tree.head]!
      tree.queue[tree.head++] = undefined as unknown as Waiter
      if (tree.head > 1024 && tree.head * 2 > tree.queue.length) {
        tree.queue = tree.queue.slice(tree.head)
        tree.head = 0
      }
      if (waiter.done) continue
      // The slot passes straight to the waiter: `running` is unchanged.
      waiter.grant({ tree, lender: undefined })
      return
    }
    tree.running--
  }

  /** Start the provider on a slot already held; the slot is released when the run's result settles. */
  private async run(slot: Slot, request: SubagentRequest, start: (request: SubagentRequest) => Promise<SubagentRun>): Promise<SubagentRun> {
    let run: SubagentRun
    try {
      if (request.signal.aborted) throw new SubagentError('ABORTED', 'the delegation was cancelled before its child was started', { cause: request.signal.reason })
      run = await start(request)
    } catch (error) {
      this.release(slot)
      throw error
    }
    const member: Member | undefined = run.local ? { slot, lent: false } : undefined
    if (member !== undefined) slot.tree.members.set(run.id, member)
    const result = run.result.finally(() => {
      if (member !== undefined && slot.tree.members.get(run.id) === member) slot.tree.members.delete(run.id)
      this.release(slot)
    })
    return withResult(run, result)
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
