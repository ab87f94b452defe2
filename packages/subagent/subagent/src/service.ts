import { randomBytes } from 'node:crypto'
import { Context, Service } from 'cordis'
import Schema from 'schemastery'
import { errorMessage, rejectOnThrow } from '@dsh/base'
import type { TextBlock } from '@dsh/llm'
import { admit } from './admission.js'
import { SubagentError } from './errors.js'
import type { SubagentProgressInfo, SubagentProvider, SubagentRequest, SubagentResult, SubagentRun, SubagentRunEndInfo, SubagentRunInfo } from './types.js'
import { ProgressChannel } from './progress/channel.js'
import { followLocalChild, latestTurnUsage } from './progress/local.js'
import { serviceInstance, type Agent, type AgentRegistry } from '@dsh/agent'
import type {} from '@dsh/tasks'
import { joinPermissionLevels, type PermissionLevel } from '@dsh/session'
import type { ContinuableChildInfo, ContinuableStarted, InterruptAuthority, StartContinuableOptions } from './continuable/types.js'
import { ContinuationManager, type ContinuableSetup } from './continuable/manager.js'
import type { BudgetEvent, TreeGate, TreeLimitsConfig } from './tree-limits.js'
import type { WorkspaceHost } from './workspace-start.js'

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

/** The observe-only events of the seam: listeners may throw or reject, never to any effect. */
export type SubagentLifecycleEvent = 'subagent/provider-added' | 'subagent/provider-removed' | 'subagent/start' | 'subagent/end' | 'subagent/progress' | 'subagent/budget' | 'subagent/queued'

/** Default least time between two `subagent/progress` events of one run: four a second. */
export const DEFAULT_PROGRESS_INTERVAL_MS = 250

type LifecyclePayload<K extends SubagentLifecycleEvent> = Parameters<import('cordis').Events[K]>[0]

/** A deep copy of text blocks (all they hold is two strings; cheaper than `structuredClone`). */
function cloneOutput(output: readonly TextBlock[]): TextBlock[] {
  return output.map((block) => ({ type: 'text', text: block.text }))
}

/**
 * `ctx.subagents`: the named-provider registry. Many providers coexist; a caller picks
 * one by name. `start` checks every requested start-time feature before the provider is
 * asked for anything, and brackets each published run with `subagent/start` and
 * `subagent/end`.
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
  private readonly progressIntervalMs: number
  private providers = new Map<string, SubagentProvider>()
  private runCounter = 0
  private readonly runPrefix = randomBytes(3).toString('hex')
  /** This service's own context: `this.ctx` is the caller's. */
  private readonly home: Context
  /**
   * The app's event bus, held directly: reaching `parallel` or `events` through a context
   * builds tracing proxies (and a logger) on every call, which a fan-out pays per child.
   */
  private readonly events: Context['events']
  private continuableSetups: ContinuableSetup[] = []
  /** See `agentRegistry`. */
  private agentsLookup: { registry: AgentRegistry | undefined } | undefined
  /** The tree gate's disposers of the continuable children it counts, by child id. */
  private readonly continuableCounts = new Map<string, () => void>()
  /** See `ownPermissions`. */
  private permissionsLookup: { levels: readonly PermissionLevel[] | undefined } | undefined
  /** Owns continuable children: creation, delivery, cold resume, notices. */
  readonly continuation: ContinuationManager
  /** The tree limits, when configured (see `tree-limits.ts`); loading until `gateLoading` settles. */
  private gate: TreeGate | undefined
  private gateLoading: Promise<void> | undefined
  private readonly treeConfig: TreeLimitsConfig | undefined

  constructor(ctx: Context, config: Partial<SubagentService.Config> = {}) {
    super(ctx, 'subagents')
    this.home = ctx
    this.events = serviceInstance(ctx.events)
    ctx.on('internal/service', () => {
      this.agentsLookup = undefined
      this.permissionsLookup = undefined
    })
    this.progressIntervalMs = config.progressIntervalMs ?? DEFAULT_PROGRESS_INTERVAL_MS
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
        if (kind === 'start') this.notify('subagent/start', info)
        else this.notify('subagent/end', info as SubagentRunEndInfo)
      },
      nextRunId: () => `run-${this.runPrefix}-${++this.runCounter}`,
      openProgress: () => this.openProgress(undefined),
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
        event: (event) => this.notify('subagent/budget', event),
        queued: (request, provider, waiting) => {
          if (!this.heard('subagent/queued')) return
          const info: SubagentQueuedInfo = { parentId: request.parent.id, provider, queued: waiting }
          if (request.label !== undefined) info.label = request.label
          if (request.callId !== undefined) info.callId = request.callId
          if (request.helper !== undefined) info.helper = request.helper.name
          this.notify('subagent/queued', info)
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
      this.notify('subagent/provider-added', provider)
      return () => {
        if (this.providers.get(name) !== provider) return
        this.providers.delete(name)
        this.notify('subagent/provider-removed', name)
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
    // As from an async function: a refused request rejects, it is not thrown at the caller.
    return rejectOnThrow(() => this.startChecked(name, request))
  }

  /**
   * Admission, then the provider. Not an async function: in the common case of a fan-out
   * (nobody listening, no progress) the provider's own promise is handed back as it is,
   * with no frame and no tick of this service's around it.
   */
  private startChecked(name: string, request: SubagentRequest): Promise<SubagentRun> {
    // Tree limits configured and still loading (only the first moments after start-up).
    if (this.gateLoading !== undefined) return this.gateLoading.then(() => this.startChecked(name, request))
    // A child with a budget of its own (a helper's), or in a tree its lineage gave one (a
    // remote child's): the gate follows it, whatever the config.
    if (this.gate === undefined && (request.budget !== undefined || givenBudget(request.parent) !== undefined)) return this.loadGate({}).then(() => this.startChecked(name, request))
    // Admission before the provider is asked for anything: nothing exists after a refusal.
    const { provider, maxDepth } = admit(this.providers, name, request)
    // A workspace of its own is made first (its module loaded only then); the child starts in it.
    if (request.workspace === 'worktree' || request.workspace === 'copy') return this.startInWorkspace(name, request)
    const rebound = maxDepth !== request.maxDepth && provider.capabilities.depthLimit
    // Progress is built only when somebody listens: otherwise providers get no sink at all.
    const progress = this.openProgress(request.onProgress)
    // This process's permission rules go with the child (none configured: nothing to add).
    const own = this.ownPermissions()
    // The request is copied only when something in it changes: the common case allocates nothing.
    const forProvider = rebound || progress !== undefined || request.progress !== undefined || own !== undefined ? { ...request, progress } : request
    if (rebound) forProvider.maxDepth = maxDepth
    if (own !== undefined) forProvider.permissions = joinPermissionLevels(own, request.permissions)
    // Nobody to tell and nothing to follow (the common case of a fan-out): no run info,
    // no id and no continuation on the result. The caller owns `result` from here on.
    if (progress === undefined && !this.heard('subagent/start') && !this.heard('subagent/end')) return this.launch(provider, forProvider)
    return this.startFollowed(name, request, provider, forProvider, progress)
  }

  /** `start` of a child with a workspace of its own (`workspace-start.ts`). */
  private async startInWorkspace(name: string, request: SubagentRequest): Promise<SubagentRun> {
    const { makeWorkspace, inWorkspace } = await import('./workspace-start.js')
    const host = this.workspaceHost()
    const { key, request: inIt } = await makeWorkspace(host, request)
    let run: SubagentRun
    try {
      run = await this.startChecked(name, inIt)
    } catch (error) {
      await host!.discard(key).catch(() => undefined)
      throw error
    }
    return inWorkspace(host!, key, run)
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

  /** The provider's start, through the tree's cap when one is configured (it may wait there for a slot). */
  private launch(provider: SubagentProvider, request: SubagentRequest): Promise<SubagentRun> {
    const gate = this.gate
    return gate === undefined ? provider.start(request) : gate.start(provider.name, request, (admitted) => provider.start(admitted))
  }

  /** `start` for a run somebody hears of: its lifecycle events and its progress channel. */
  private async startFollowed(name: string, request: SubagentRequest, provider: SubagentProvider, forProvider: SubagentRequest, progress: ProgressChannel | undefined): Promise<SubagentRun> {
    let run: SubagentRun
    try {
      run = await this.launch(provider, forProvider)
    } catch (error) {
      progress?.close()
      throw error
    }
    const info: SubagentRunInfo = {
      runId: `run-${this.runPrefix}-${++this.runCounter}`,
      provider: name,
      id: run.id,
      local: run.local,
      parentId: request.parent.id,
    }
    if (request.label !== undefined) info.label = request.label
    if (request.callId !== undefined) info.callId = request.callId
    if (request.helper !== undefined) info.helper = request.helper.name
    this.notify('subagent/start', info)
    let unfollow: (() => void) | undefined
    if (progress !== undefined) {
      progress.bind(info)
      const session = run.local ? this.localSession(run.id) : undefined
      if (session !== undefined) unfollow = followLocalChild(session, progress)
    }
    // Attached before the caller sees the run, so `end` is emitted before the caller's
    // own continuation; the clone keeps a mutating listener away from the caller's result.
    run.result.then(
      (result) => {
        unfollow?.()
        progress?.close()
        if (!this.heard('subagent/end')) return
        const end: SubagentRunEndInfo = { ...info, stopReason: result.stopReason }
        if (result.diagnostic !== undefined) end.diagnostic = result.diagnostic
        if (result.output.length > 0) end.lastAssistantMessage = cloneOutput(result.output)
        const usage = this.usageOf(run, result)
        if (usage !== undefined) end.usage = usage
        this.notify('subagent/end', end)
      },
      (error: unknown) => {
        unfollow?.()
        progress?.close()
        this.notify('subagent/end', { ...info, stopReason: 'error', diagnostic: `the run failed: ${errorMessage(error)}` })
      },
    )
    return run
  }

  /**
   * A progress channel for one run, or `undefined` when nobody would hear it (no
   * `subagent/progress` listener and no caller observer): then nothing is built at all.
   */
  private openProgress(observer: SubagentRequest['onProgress']): ProgressChannel | undefined {
    if (observer === undefined && !this.heard('subagent/progress')) return undefined
    // Made only to report a failure: a logger built through the context costs a fan-out per child.
    const log = () => this.home.logger('subagents')
    return new ProgressChannel({
      intervalMs: this.progressIntervalMs,
      emit: (info) => {
        this.notify('subagent/progress', info)
        if (observer === undefined) return
        try {
          observer(info)
        } catch (error) {
          log().warn('a progress observer failed (ignored): %s', errorMessage(error))
        }
      },
      onMalformed: (reason) => log().debug('a progress update was dropped: %s', reason),
    })
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

  /** What a run used: the provider's figure, else an in-process child's own log. */
  private usageOf(run: SubagentRun, result: SubagentResult) {
    if (result.usage !== undefined) return { ...result.usage }
    if (!run.local) return undefined
    const session = this.localSession(run.id)
    return session === undefined ? undefined : latestTurnUsage(session)
  }

  /**
   * Start a continuable child: resolves `{ childId, messageId }` once the child's inbox
   * accepted the first prompt; any failure before that rolls everything back and rejects.
   */
  async startContinuable(options: StartContinuableOptions): Promise<ContinuableStarted> {
    const { provider, maxDepth } = admit(this.providers, options.provider, { ...options.request, signal: options.signal })
    const own = this.ownPermissions()
    if (own !== undefined) options = { ...options, request: { ...options.request, permissions: joinPermissionLevels(own, options.request.permissions) } }
    // A budget of its own (a helper's), or a tree its lineage gave one: the gate follows it, whatever the config.
    if (this.gateLoading !== undefined) await this.gateLoading
    if (this.gate === undefined && (options.request.budget !== undefined || givenBudget(options.request.parent) !== undefined)) await this.loadGate(this.treeConfig ?? {})
    // Under a tree's budget: refused when it is spent, handed what is left, and counted (an
    // in-process child's turns) for as long as it lives.
    const admission = this.gate?.admitContinuable(options.request.parent, options.request.budget)
    if (admission !== undefined) options = { ...options, request: { ...options.request, budget: admission.budget } }
    let started: ContinuableStarted
    try {
      started = await this.startContinuableIn(provider, maxDepth, options)
    } catch (error) {
      admission?.adopt(undefined)
      throw error
    }
    if (admission !== undefined) {
      const child = this.agentRegistry()?.get(started.childId)
      const release = admission.adopt(child)
      if (child !== undefined) this.continuableCounts.set(child.id, release)
    }
    return started
  }

  private async startContinuableIn(provider: SubagentProvider, maxDepth: number | undefined, options: StartContinuableOptions): Promise<ContinuableStarted> {
    if (options.request.workspace !== 'worktree' && options.request.workspace !== 'copy') return this.continuation.startContinuable(provider, maxDepth, options)
    // Its workspace outlives the process with it (its header keeps the directory): kept until merged or discarded.
    const { makeWorkspace } = await import('./workspace-start.js')
    const host = this.workspaceHost()
    const { key, request } = await makeWorkspace(host, { ...options.request, label: options.label })
    try {
      const started = await this.continuation.startContinuable(provider, maxDepth, { ...options, request })
      host!.rename(key, started.childId, { persistent: true })
      return started
    } catch (error) {
      await host!.discard(key).catch(() => undefined)
      throw error
    }
  }

  /**
   * The permission rules of this process (`ctx.approvals`' configured levels), which every
   * child started here is under; `undefined` when there is no broker or it has no rules.
   * Looked up once and again whenever a service comes or goes, like `agentRegistry`.
   */
  private ownPermissions(): readonly PermissionLevel[] | undefined {
    if (this.permissionsLookup === undefined) {
      // Read by shape: the broker (`@dsh/approvals`) is a service beside this one, not a dependency of it.
      const approvals = this.home.get('approvals') as { ownLevels?: readonly PermissionLevel[] } | undefined
      const levels = approvals && serviceInstance(approvals).ownLevels
      this.permissionsLookup = { levels: levels !== undefined && levels.length > 0 ? levels : undefined }
    }
    return this.permissionsLookup.levels
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

  /**
   * Emit an observe-only event to every `ctx.on(name, …)` listener, whichever plugin
   * registered it and whenever (before this service existed too). Cordis's `parallel`
   * calls each listener at once, in registration order, and gathers what each throws or
   * rejects; nothing waits for it here, so a listener affects neither its peers nor the
   * run, and a failure is logged instead of becoming an unhandled rejection.
   */
  private notify<K extends SubagentLifecycleEvent>(name: K, payload: LifecyclePayload<K>): void {
    if (!this.heard(name)) return
    const events = this.events as unknown as { parallel(name: K, payload: LifecyclePayload<K>): Promise<void> }
    const emitted = events.parallel(name, payload)
    emitted.catch((error: unknown) => {
      const log = this.home.logger('subagents')
      const failures = error instanceof AggregateError ? error.errors : [error]
      for (const failure of failures) log.warn('a %s listener failed (ignored): %s', name, errorMessage(failure))
    })
  }

  /**
   * Whether emitting `name` would reach anyone: a listener of it, or of every dispatch.
   * Cordis keeps listeners per event name in `events._hooks` (public in its typings);
   * counting them is the only way to know that nobody listens without emitting, and then
   * the payload need not even be built.
   */
  private heard(name: SubagentLifecycleEvent): boolean {
    const hooks = this.events._hooks
    return (hooks[name]?.length ?? 0) > 0 || (hooks['internal/dispatch']?.length ?? 0) > 0
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

/** The budget a delegation handed the root of `agent`'s tree (a remote child's), read from its header. */
function givenBudget(agent: Agent): unknown {
  let root = agent
  while (root.parent !== undefined) root = root.parent
  return root.session.header.budget
}

export namespace SubagentService {
  export interface Config {
    /** Least time between two `subagent/progress` events of one run, in milliseconds. */
    progressIntervalMs: number
    /** Limits on each delegation tree (`tree-limits.ts`). */
    tree?: TreeLimitsConfig
  }
}
