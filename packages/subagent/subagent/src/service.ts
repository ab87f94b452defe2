import { Context, Service } from 'cordis'
import Schema from 'schemastery'
import { rejectOnThrow } from '@dsh/base'
import type { TextBlock } from '@dsh/llm'
import { SubagentError } from './errors.js'
import type { SubagentProgressInfo, SubagentProvider, SubagentRequest, SubagentRun, SubagentRunEndInfo, SubagentRunInfo } from './types.js'
import { RunObserver } from './observe.js'
import { serviceInstance, type Agent, type AgentRegistry } from '@dsh/agent'
import type {} from '@dsh/tasks'
import { joinPermissionLevels, type PermissionLevel } from '@dsh/session'
import type { ContinuableChildInfo, ContinuableStarted, InterruptAuthority, StartContinuableOptions } from './continuable/types.js'
import { ContinuationManager, type ContinuableSetup } from './continuable/manager.js'
import type { BudgetEvent, TreeGate, TreeLimitsConfig } from './tree-limits.js'
import type { WorkspaceHost } from './workspace-start.js'
import { admitStage, Delegation, runStages, type StartStage, type Started } from './start-pipeline.js'
import { approvalDefaultFrom, type ApprovalDefaults } from './lineage.js'

export type { SubagentLifecycleEvent } from './observe.js'

declare module 'cordis' {
  interface Context {
    subagents: SubagentService
  }
  interface Events {
    'subagent/provider-added'(provider: SubagentProvider): void
    'subagent/provider-removed'(name: string): void
    'subagent/start'(info: SubagentRunInfo): void
    'subagent/end'(info: SubagentRunEndInfo): void
    'subagent/progress'(info: SubagentProgressInfo): void
    /** A delegation tree's budget: a limit near (`warning`), the tree's spent, or one child stopped by its own. */
    'subagent/budget'(event: BudgetEvent): void
    /** A delegation waits for a slot of its tree's cap (`queued: true`), or stops waiting (it starts, or is cancelled or refused). */
    'subagent/queued'(info: SubagentQueuedInfo): void
  }
}

/** Default least time between two `subagent/progress` events of one run: four a second. */
export const DEFAULT_PROGRESS_INTERVAL_MS = 250

/**
 * `ctx.subagents`: the named-provider registry. Many providers coexist; a caller picks
 * one by name. `start` and `startContinuable` pass one pipeline of stages
 * (`start-pipeline.ts`): every requested start-time feature is checked before the
 * provider is asked for anything, and each published run is bracketed with
 * `subagent/start` and `subagent/end`.
 */
export class SubagentService extends Service {
  /** `agents` is not required: one-shot delegation works without it; continuation needs it (`CONTINUATION_UNAVAILABLE`). */
  static inject = ['sessions']
  static Config: Schema<SubagentService.Config> = Schema.object({
    progressIntervalMs: Schema.natural()
      .min(10)
      .max(60_000)
      .default(DEFAULT_PROGRESS_INTERVAL_MS)
      .description('Least time between two `subagent/progress` events of one run, in milliseconds (the rest is coalesced).'),
    tree: Schema.object({
      maxConcurrent: Schema.natural().min(1).max(10_000).description('Most children of one delegation tree (a root and all its in-process descendants) running at once; more wait in a FIFO queue.'),
      maxQueued: Schema.natural().min(1).max(1_000_000).description('Most children of one tree waiting for a slot (default 1000); beyond it a delegation is refused.'),
      maxConcurrentPerProvider: Schema.dict(Schema.natural().min(1).max(10_000)).description('Most children of one tree running at once on each named provider ({ acp: 2 }), inside maxConcurrent.'),
      budget: Schema.object({
        outputTokens: Schema.natural().min(1).max(1e12).description('Output tokens the tree\'s children may use together.'),
        inputTokens: Schema.natural().min(1).max(1e12).description('Input tokens (cached or not) the tree\'s children may use together.'),
        children: Schema.natural().min(1).max(1_000_000).description('Children that may start in the tree, at any depth.'),
        cost: Schema.number().min(0.000001).max(1e9).description('Money the tree\'s in-process children may spend together, in the unit of the llm service\'s prices table.'),
        wallTimeMs: Schema.natural().min(1).max(30 * 24 * 3600 * 1000).description('How long the tree\'s children may run, from its first delegation; then the running ones are stopped and no more start.'),
        warnAt: Schema.number().min(0.01).max(0.99).default(0.8).description('The fraction of a limit at which the tree\'s root is warned (its model reads a note; the live tree shows it).'),
      }).description('What one tree\'s children may spend; at a limit the running ones are stopped and no more start.'),
    }).description('Limits on each delegation tree; unset: none, and nothing is loaded for them.'),
  })
  private readonly providers = new Map<string, SubagentProvider>()
  /** The stages every start passes, in this order (`start-pipeline.ts`). */
  private readonly stages: readonly StartStage[] = [
    admitStage(this.providers),
    (delegation, next) => this.ownApprovalsStage(delegation, next),
    (delegation, next) => this.observer.stage(delegation, next),
    (delegation, next) => this.gateStage(delegation, next),
    (delegation, next) => this.workspaceStage(delegation, next),
    (delegation) => this.providerStage(delegation),
  ]
  /** This service's own context: `this.ctx` is the caller's. */
  private readonly home: Context
  /** Its lifecycle events and live progress (`observe.ts`). */
  private readonly observer: RunObserver
  private continuableSetups: ContinuableSetup[] = []
  /** See `agentRegistry`. */
  private agentsLookup: { registry: AgentRegistry | undefined } | undefined
  /** The tree gate's disposers of the continuable children it counts, by child id. */
  private readonly continuableCounts = new Map<string, () => void>()
  /** See `ownApprovals`. */
  private approvalsLookup: OwnApprovals | undefined
  /** Owns continuable children: creation, delivery, cold resume, notices. */
  readonly continuation: ContinuationManager
  /** The tree limits, when configured (see `tree-limits.ts`); loading until `gateLoading` settles. */
  private gate: TreeGate | undefined
  private gateLoading: Promise<void> | undefined
  private readonly treeConfig: TreeLimitsConfig | undefined

  constructor(ctx: Context, config: Partial<SubagentService.Config> = {}) {
    super(ctx, 'subagents')
    this.home = ctx
    this.observer = new RunObserver({
      events: serviceInstance(ctx.events),
      home: ctx,
      progressIntervalMs: config.progressIntervalMs ?? DEFAULT_PROGRESS_INTERVAL_MS,
      localSession: (id) => this.localSession(id),
    })
    ctx.on('internal/service', () => {
      this.agentsLookup = undefined
      this.approvalsLookup = undefined
    })
    const tree = config.tree
    this.treeConfig = tree
    const budget = tree?.budget
    // Imported only when configured (or a request carries a budget): otherwise never loaded.
    if (tree !== undefined && (tree.maxConcurrent !== undefined || tree.maxQueued !== undefined || Object.keys(tree.maxConcurrentPerProvider ?? {}).length > 0 || (budget !== undefined && Object.entries(budget).some(([key, limit]) => key !== 'warnAt' && limit !== undefined)))) {
      this.loadGate(tree)
    }
    this.continuation = new ContinuationManager({
      home: ctx,
      provider: (name) => this.providers.get(name),
      agents: () => {
        const agents = ctx.get('agents')
        return agents && serviceInstance(agents)
      },
      sessions: () => serviceInstance(ctx.sessions),
      tasks: () => {
        const tasks = ctx.get('tasks')
        return tasks && serviceInstance(tasks)
      },
      setups: () => this.continuableSetups,
      announce: (kind: 'start' | 'end', info: SubagentRunInfo | SubagentRunEndInfo) => {
        if (kind === 'start') this.observer.notify('subagent/start', info)
        else this.observer.notify('subagent/end', info as SubagentRunEndInfo)
      },
      nextRunId: () => this.observer.nextRunId(),
      openProgress: () => this.observer.openProgress(undefined),
    })
    // A parent takes its continuable children down with it: none outlives it; a parent
    // resumed brings back the children that had messages queued. Registered whenever
    // `ctx.agents` is there (continuable children exist only then).
    ctx.inject(['agents'], (withAgents) => {
      withAgents.agents.onCleanup((agent) => {
        // A continuable child the tree gate counted is counted no more.
        this.continuableCounts.get(agent.id)?.()
        this.continuableCounts.delete(agent.id)
        return this.continuation.disposeChildrenOf(agent)
      })
      withAgents.agents.onResume((agent) => this.continuation.resumed(agent))
    })
    // Continuable children are owned work of the one registry: "the parent is quiet" counts them.
    ctx.inject(['tasks'], (withTasks) => {
      withTasks.tasks.addWorkSource(this.continuation)
    })
  }

  /**
   * Cordis awaits this before the service is up: a configured gate is loaded by then, so the
   * first delegation already knows whether it has to queue (a background call says so at once).
   */
  [Service.init](): Promise<void> | undefined {
    return this.gateLoading
  }

  /** Load the tree limits' module and make the gate every later start goes through. */
  private loadGate(tree: TreeLimitsConfig): Promise<void> {
    this.gateLoading ??= import('./tree-limits.js').then((module) => {
      this.gate = new module.TreeGate(tree, {
        sessionOf: (id) => this.localSession(id),
        warn: (message) => this.home.logger('subagents').warn('%s', message),
        prices: () => {
          const llm = this.home.get('llm')
          return (llm && serviceInstance(llm).prices) ?? {}
        },
        tell: (root, text) => {
          // The root's model reads it at its next step, like any notice of its owned work.
          const tasks = this.home.get('tasks')
          if (tasks) serviceInstance(tasks).notices.post(root, { role: 'user', content: [{ type: 'text', text }] }, { durable: true })
        },
        event: (event) => this.observer.notify('subagent/budget', event),
        queued: (request, provider, waiting) => {
          if (!this.observer.heard('subagent/queued')) return
          const info: SubagentQueuedInfo = { parentId: request.parent.id, provider, queued: waiting }
          if (request.label !== undefined) info.label = request.label
          if (request.callId !== undefined) info.callId = request.callId
          if (request.helper !== undefined) info.helper = request.helper.name
          this.observer.notify('subagent/queued', info)
        },
      })
      this.gateLoading = undefined
    })
    return this.gateLoading
  }

  /**
   * What in the `tree` config cannot work in this composition, one line each, for a host to
   * check once start-up is over (providers register after this service): a provider cap
   * naming no registered provider, a cost budget without a price table.
   */
  treeLimitProblems(): string[] {
    const tree = this.treeConfig
    if (tree === undefined) return []
    const problems: string[] = []
    for (const name of Object.keys(tree.maxConcurrentPerProvider ?? {})) {
      if (!this.providers.has(name)) problems.push(`tree.maxConcurrentPerProvider names subagent provider "${name}", which is not registered (registered: ${this.list().join(', ') || 'none'})`)
    }
    if (tree.budget?.cost !== undefined) {
      const llm = this.home.get('llm')
      if (Object.keys((llm && serviceInstance(llm).prices) ?? {}).length === 0) {
        problems.push(`tree.budget.cost (${tree.budget.cost}) needs a price table: set prices in the llm service's config (model spec → { input, output } per million tokens)`)
      }
    }
    return problems
  }

  registerProvider(provider: SubagentProvider): () => void {
    const { name } = provider
    if (typeof name !== 'string' || !name) throw new SubagentError('INVALID_REQUEST', 'a provider needs a non-empty name')
    if (this.providers.has(name)) {
      throw new SubagentError('DUPLICATE_PROVIDER', `a subagent provider named "${name}" is already registered; give the second one a different providerName`)
    }
    return this.ctx.effect(() => {
      this.providers.set(name, provider)
      this.observer.notify('subagent/provider-added', provider)
      return () => {
        if (this.providers.get(name) !== provider) return
        this.providers.delete(name)
        this.observer.notify('subagent/provider-removed', name)
      }
    }, `subagents.registerProvider(${JSON.stringify(name)})`)
  }

  getProvider(name: string): SubagentProvider | undefined {
    return this.providers.get(name)
  }

  list(): string[] {
    return [...this.providers.keys()]
  }

  start(name: string, request: SubagentRequest): Promise<SubagentRun> {
    // As from an async function: a refused request rejects, it is not thrown at the caller
    // (caught here rather than by rejectOnThrow, which would make a closure per child).
    try {
      return runStages(this.stages, new Delegation(name, request)) as Promise<SubagentRun>
    } catch (error) {
      return Promise.reject(error)
    }
  }

  /**
   * This process's permission rules go with the child, and its broker's default for the
   * parent's tree (the lineage's `approvalDefault`). No broker: nothing is added, and a
   * caller's own default is not sent on.
   */
  private ownApprovalsStage(delegation: Delegation, next: () => Promise<Started>): Promise<Started> {
    const { levels, broker } = this.ownApprovals()
    const { request, added } = delegation
    if (levels !== undefined) added.permissions = joinPermissionLevels(levels, request.permissions)
    if (broker !== undefined) added.approvalDefault = approvalDefaultFrom(broker, request.parent) ?? 'unsaid'
    else if (request.approvalDefault !== undefined) added.approvalDefault = 'unsaid'
    return next()
  }

  /**
   * The tree's slot and budget (`tree-limits.ts`), when limits are configured, or the child
   * has a budget of its own (a helper's), or its tree was given one by its lineage (a
   * remote child's): then the gate is loaded, whatever the config.
   */
  private gateStage(delegation: Delegation, next: () => Promise<Started>): Promise<Started> {
    // Tree limits configured and still loading (only the first moments after start-up).
    if (this.gateLoading !== undefined) return this.gateLoading.then(() => this.gateStage(delegation, next))
    const { request } = delegation
    if (this.gate === undefined && (request.budget !== undefined || givenBudget(request.parent) !== undefined)) return this.loadGate(this.treeConfig ?? {}).then(() => this.gateStage(delegation, next))
    const gate = this.gate
    if (gate === undefined) return next()
    if (delegation.continuable !== undefined) return this.admitContinuable(gate, delegation, next as () => Promise<ContinuableStarted>)
    // It may wait here for a slot: nothing has been made for it yet.
    return gate.start(delegation.provider.name, request, (handed) => {
      if (handed.budget !== undefined) delegation.added.budget = handed.budget
      if (handed.countUsage !== undefined) delegation.added.countUsage = handed.countUsage
      return next() as Promise<SubagentRun>
    })
  }

  /**
   * A continuable child under its tree's budget: refused when it is spent, handed what is
   * left, and counted (an in-process child's turns) for as long as it lives.
   */
  private async admitContinuable(gate: TreeGate, delegation: Delegation, next: () => Promise<ContinuableStarted>): Promise<ContinuableStarted> {
    const admission = gate.admitContinuable(delegation.request.parent, delegation.request.budget)
    if (admission.budget !== undefined) delegation.added.budget = admission.budget
    let started: ContinuableStarted
    try {
      started = await next()
    } catch (error) {
      admission.adopt(undefined)
      throw error
    }
    const child = this.agentRegistry()?.get(started.childId)
    const release = admission.adopt(child)
    if (child !== undefined) this.continuableCounts.set(child.id, release)
    return started
  }

  /** A workspace of its own, when asked for (`workspace-start.ts`, loaded only then): made once the child has its slot. */
  private workspaceStage(delegation: Delegation, next: () => Promise<Started>): Promise<Started> {
    const mode = delegation.request.workspace
    if (mode !== 'worktree' && mode !== 'copy') return next()
    return this.startInWorkspace(delegation, next)
  }

  private async startInWorkspace(delegation: Delegation, next: () => Promise<Started>): Promise<Started> {
    const { makeWorkspace, inWorkspace } = await import('./workspace-start.js')
    const host = this.workspaceHost()
    const { continuable } = delegation
    const { key, workingDirectory } = await makeWorkspace(host, continuable === undefined ? delegation.request : { ...delegation.request, label: continuable.label })
    delegation.added.workingDirectory = workingDirectory
    let started: Started
    try {
      started = await next()
      // A continuable child's workspace outlives the process with it (its header keeps the directory): kept until merged or discarded.
      if (continuable !== undefined) host!.rename(key, (started as ContinuableStarted).childId, { persistent: true })
    } catch (error) {
      await host!.discard(key).catch(() => undefined)
      throw error
    }
    return continuable === undefined ? inWorkspace(host!, key, started as SubagentRun) : started
  }

  /** The provider's start (a continuable child's through the continuation manager), with the request built for it. */
  private providerStage(delegation: Delegation): Promise<Started> {
    const { continuable } = delegation
    if (continuable === undefined) return delegation.provider.start(delegation.forProvider())
    const request = delegation.forManager()
    return this.continuation.startContinuable(delegation.provider, delegation.maxDepth, request === continuable.request ? continuable : { ...continuable, request })
  }

  /** `ctx.workspaces`, read by shape: `@dsh/workspaces` is a service beside this one, not a dependency. */
  private workspaceHost(): WorkspaceHost | undefined {
    const workspaces = this.home.get('workspaces') as WorkspaceHost | undefined
    return workspaces && serviceInstance(workspaces)
  }

  /**
   * Bound `root`'s tree by the budget its delegation handed it (its header's `budget`: a
   * `dsh acp`, `dsh a2a serve` or `dsh worker` session whose parent runs elsewhere) from
   * now, its own model calls counted, before it delegates anything. A host calls it once
   * the session exists; nothing happens for a root without one.
   */
  async boundByLineage(root: Agent): Promise<void> {
    if (root.parent !== undefined || root.session.header.budget === undefined) return
    if (this.gate === undefined) await this.loadGate(this.treeConfig ?? {})
    this.gate!.track(root)
  }

  /** The session of in-process child `id`, while its agent is registered. */
  private localSession(id: string) {
    return this.agentRegistry()?.get(id)?.session
  }

  /**
   * `ctx.agents` itself (or undefined), looked up once and again whenever a service comes or
   * goes: `ctx.get` builds tracing proxies on every call, which a run with progress paid twice.
   */
  private agentRegistry(): AgentRegistry | undefined {
    if (this.agentsLookup === undefined) {
      const agents = this.home.get('agents')
      this.agentsLookup = { registry: agents && serviceInstance(agents) }
    }
    return this.agentsLookup.registry
  }

  /**
   * Start a continuable child: resolves `{ childId, messageId }` once the child's inbox
   * accepted the first prompt; any failure before that rolls everything back and rejects.
   */
  startContinuable(options: StartContinuableOptions): Promise<ContinuableStarted> {
    return rejectOnThrow(() => runStages(this.stages, new Delegation(options.provider, { ...options.request, signal: options.signal }, options)) as Promise<ContinuableStarted>)
  }

  /**
   * This process's approval broker (`ctx.approvals`), when composed, and its configured
   * permission levels, which every child started here is under (`undefined` without rules).
   * Looked up once and again whenever a service comes or goes, like `agentRegistry`: a
   * child never looks for the broker through its parent's context.
   */
  private ownApprovals(): OwnApprovals {
    if (this.approvalsLookup === undefined) {
      // Read by shape: the broker (`@dsh/approvals`) is a service beside this one, not a dependency of it.
      const approvals = this.home.get('approvals') as (Partial<ApprovalDefaults> & { ownLevels?: readonly PermissionLevel[] }) | undefined
      const broker = approvals && serviceInstance(approvals)
      const levels = broker?.ownLevels
      this.approvalsLookup = {
        levels: levels !== undefined && levels.length > 0 ? levels : undefined,
        broker: typeof broker?.defaultFor === 'function' ? (broker as ApprovalDefaults) : undefined,
      }
    }
    return this.approvalsLookup
  }

  /** Deliver `message` to continuable child `childId` as a new turn; only its direct parent may. */
  async followup(parent: Agent, childId: string, message: string | TextBlock[], options: { signal?: AbortSignal } = {}): Promise<{ messageId: string }> {
    // A budget that stopped it (its tree's, its own) keeps it stopped: no more turns.
    this.gate?.refuseFollowup(parent, childId)
    return this.continuation.followup(parent, childId, message, options.signal)
  }

  /** Stop the running turn of continuable child `childId` (it stays resumable); authority from the durable lineage. */
  interrupt(childId: string, authority: InterruptAuthority): Promise<void> {
    return this.continuation.interrupt(childId, authority)
  }

  /** A continuable child hands its parent an intermediate result; returns the message id. */
  reportFrom(child: Agent, output: string | TextBlock[]): string {
    return this.continuation.reportFrom(child, output)
  }

  /** The continuable children of `parentId`, live and stored. */
  listChildren(parentId: string, signal?: AbortSignal): Promise<ContinuableChildInfo[]> {
    return this.continuation.listChildren(parentId, signal)
  }

  /** Every continuable descendant of `rootId`, pre-order, with parent and depth. */
  listDescendants(rootId: string, signal?: AbortSignal): Promise<ContinuableChildInfo[]> {
    return this.continuation.listDescendants(rootId, signal)
  }

  /**
   * Install `setup` in every continuable child's own context before it is visible (fresh
   * and cold-resumed); it returns the tool names a child's filter must keep. An effect.
   */
  registerContinuableSetup(setup: ContinuableSetup): () => void {
    return this.ctx.effect(() => {
      this.continuableSetups = [...this.continuableSetups, setup]
      return () => {
        this.continuableSetups = this.continuableSetups.filter((entry) => entry !== setup)
      }
    }, 'subagents.registerContinuableSetup()')
  }

}

/** Payload of `subagent/queued`: a delegation that waits for a slot of its tree's cap, before it has a child. */
export interface SubagentQueuedInfo {
  parentId: string
  provider: string
  /** The parent's tool call that asked for it: the same call names the run once it starts. */
  callId?: string
  label?: string
  helper?: string
  queued: boolean
}

/** What `ownApprovals` found. */
interface OwnApprovals {
  levels: readonly PermissionLevel[] | undefined
  broker: ApprovalDefaults | undefined
}

/** The budget a delegation handed the root of `agent`'s tree (a remote child's), read from its header. */
function givenBudget(agent: Agent): unknown {
  return agent.root.session.header.budget
}

export namespace SubagentService {
  export interface Config {
    /** Least time between two `subagent/progress` events of one run, in milliseconds. */
    progressIntervalMs: number
    /** Limits on each delegation tree (`tree-limits.ts`). */
    tree?: TreeLimitsConfig
  }
}
