/**
 * The continuation manager: creates continuable children, delivers follow-ups as new
 * turns (cold-resuming a child from its session when it is not in memory), tells each
 * parent when a child's turn settles, and takes children down with their parent.
 *
 * A child is one durable session (its header holds the lineage and the descriptor) and,
 * while it is in memory, one `ResidentChild` (an agent in `ctx.agents` or a driven remote
 * conversation, with its queue of follow-ups).
 */
import { randomBytes } from 'node:crypto'
import type { Context } from 'cordis'
import { errorMessage } from '@dsh/base'
import type { Agent, AgentRegistry } from '@dsh/agent'
import type { TextBlock, UserMessage } from '@dsh/llm'
import { newSessionId, type Session, type SessionHeader, type SessionStore } from '@dsh/session'
import { SubagentError } from '../errors.js'
import { refuseDisposedParent } from '../admission.js'
import { createInProcessChild, resumeInProcessChild } from '../in-process-child.js'
import type { SubagentProvider, SubagentRunEndInfo, SubagentRunInfo } from '../types.js'
import type { ProgressChannel } from '../progress/channel.js'
import { followLocalChild, latestTurnUsage } from '../progress/local.js'
import { makeDescriptor, parseDescriptor } from './descriptor.js'
import { isDurableAncestor, lookUpHeader } from './ancestry.js'
import { listChildren, listDescendants } from './listing.js'
import { reportMessage, settlementNotice } from './notice.js'
import { recordRemoteChild, reopenRemoteChild, type RemoteStart } from './remote-record.js'
import { ResidentChild, type ResidentBody, type ResidentEvents, type TurnSettlement } from './resident.js'
import type { ContinuableChildInfo, ContinuableDescriptor, ContinuableStarted, InterruptAuthority, RemoteChildRecord, RemoteConversation, StartContinuableOptions } from './types.js'
import { pendingMessages } from './resident.js'
import { assertParent, notResumable, unauthorized } from './refusals.js'
import type { TaskService } from '@dsh/tasks'

/**
 * Installed in every continuable child's own context before it is visible (fresh and
 * cold-resumed alike). Returns the names of tools it registered: a child's tool filter
 * never hides them.
 */
export type ContinuableSetup = (childCtx: Context, child: Agent) => readonly string[] | void

/** What the manager needs from the service that owns it. */
export interface ManagerHost {
  home: Context
  provider(name: string): SubagentProvider | undefined
  agents(): AgentRegistry | undefined
  sessions(): SessionStore
  /** The registry of owned work: where notices go and where "the parent is quiet" is decided. */
  tasks(): TaskService | undefined
  setups(): readonly ContinuableSetup[]
  /** Announce a continuable child's turn on the observe-only lifecycle events. */
  announce(kind: 'start', info: SubagentRunInfo): void
  announce(kind: 'end', info: SubagentRunEndInfo): void
  nextRunId(): string
  /** An unbound progress channel for a turn, or `undefined` when nobody listens. */
  openProgress(): ProgressChannel | undefined
}

/** The live progress of a child's current turn: its channel, and the unsubscriber of an in-process child's session. */
interface TurnProgress {
  channel: ProgressChannel
  unfollow?: () => void
}

export class ContinuationManager {
  private readonly resident = new Map<string, ResidentChild>()
  /** Children being created or cold-resumed: a second caller waits for the first. */
  private readonly materialising = new Map<string, Promise<ResidentChild>>()
  /** Parents resumed whose children are being brought back to run the messages they had queued. */
  private readonly resuming = new Map<string, Promise<void>>()
  /** The lifecycle run of each child's current turn (between `subagent/start` and `subagent/end`). */
  private readonly runs = new Map<string, SubagentRunInfo>()
  /** The progress of each child's current turn, when somebody listens. */
  private readonly progress = new Map<string, TurnProgress>()
  private settledWaiters: Array<() => void> = []
  private messageCounter = 0
  private readonly messagePrefix = randomBytes(3).toString('hex')
  private readonly residentEvents: ResidentEvents

  constructor(private readonly host: ManagerHost) {
    const log = host.home.logger('subagents')
    this.residentEvents = {
      turnStarted: (child) => this.turnStarted(child),
      turnEnded: (child, settlement) => this.turnEnded(child, settlement),
      changed: () => this.wakeWaiters(),
      log: (level, message) => (level === 'info' ? log.info(message) : log.debug(message)),
    }
  }

  /** `provider` and `maxDepth` are the service's admission's (`admit`). */
  async startContinuable(provider: SubagentProvider, maxDepth: number | undefined, options: StartContinuableOptions): Promise<ContinuableStarted> {
    const { provider: name, label, request, signal } = options
    if (!provider.prepareContinuable) {
      throw new SubagentError('UNSUPPORTED_CAPABILITY', `subagent provider "${name}" cannot keep a child across turns (it has no prepareContinuable); use a one-shot delegation or a provider that can`)
    }
    if (typeof label !== 'string' || !label.trim()) throw new SubagentError('INVALID_REQUEST', 'a continuable child needs a non-empty label')
    const agents = this.requireAgents()
    this.requireTasks()
    const sessions = this.host.sessions()
    if (sessions.storageName === undefined) {
      throw new SubagentError('PERSISTENCE_UNAVAILABLE', 'continuable children need session storage to be reachable after a restart; load @dsh/session-jsonl (dsh run does unless --no-persist)')
    }
    const { parent } = request
    if (signal.aborted) throw new SubagentError('ABORTED', 'the delegation was cancelled before the child was started', { cause: signal.reason })
    const depth = parent.depth + 1
    if (options.childId !== undefined) await this.refuseTakenId(options.childId, sessions, agents)
    // Chosen before the provider is asked, so a remote provider can name its conversation after it.
    const childId = options.childId ?? newSessionId()

    const descriptor = makeDescriptor({
      provider: name,
      label,
      model: request.agentOptions?.model ?? parent.options.model,
      persona: request.persona,
      toolFilter: request.toolFilter,
    })
    // A remote child is told the tighter bound, so it holds across the process boundary.
    const bounded = maxDepth !== request.maxDepth ? { ...request, maxDepth } : request
    const preparation = await provider.prepareContinuable({ childId, parent, descriptor, request: bounded, signal })
    if (preparation.kind === 'remote') return this.startRemote(preparation.conversation, { childId, parent, depth, descriptor, signal, prompt: request.prompt })
    if (signal.aborted) throw new SubagentError('ABORTED', 'the delegation was cancelled while the child was being prepared', { cause: signal.reason })

    const child = await this.materialise(childId, async () => {
      const agent = await createInProcessChild(
        agents,
        { ...bounded, signal, label },
        { provider: name, seed: preparation.seed, id: childId, descriptor: descriptor as unknown as Record<string, unknown>, setup: (childCtx, created) => this.setUp(childCtx, created) },
      )
      return this.makeResident(agent.session, parent, descriptor, { kind: 'agent', agent })
    })
    return { childId: child.childId, messageId: this.deliver(child, { role: 'user', content: request.prompt }) }
  }

  async followup(parent: Agent, childId: string, message: string | TextBlock[], signal?: AbortSignal): Promise<{ messageId: string }> {
    const content: TextBlock[] = typeof message === 'string' ? [{ type: 'text', text: message }] : message
    if (content.length === 0 || content.every((block) => !block.text)) throw new SubagentError('INVALID_REQUEST', `a message to subagent ${childId} needs some text`)
    refuseDisposedParent(parent)
    const resident = this.resident.get(childId)
    if (resident) {
      assertParent(resident.parentId, parent, childId)
      return { messageId: this.deliver(resident, { role: 'user', content }) }
    }
    const child = await this.coldResume(parent, childId, signal)
    return { messageId: this.deliver(child, { role: 'user', content }) }
  }

  /**
   * Stop the running turn of `childId`. Authority is checked against the durable lineage,
   * so it holds for a child that is not in memory too; nothing is created or changed.
   */
  async interrupt(childId: string, authority: InterruptAuthority): Promise<void> {
    const found = await lookUpHeader(this.host.sessions(), childId)
    if ('missing' in found) throw notResumable(childId, 'there is no such subagent (no live or stored session has this id); list_agents shows your subagents')
    if ('unreadable' in found) throw notResumable(childId, `its session cannot be read: ${found.unreadable}`)
    const { header } = found
    if (authority.kind === 'user') {
      if (header.parentSession !== authority.parentSessionId) throw unauthorized(`session ${authority.parentSessionId} is not the parent of subagent ${childId}`)
    } else if (authority.agent.id === childId) {
      throw unauthorized(`agent ${childId} cannot interrupt itself`)
    } else if (!(await isDurableAncestor(this.host.sessions(), authority.agent.id, header))) {
      throw unauthorized(`agent ${authority.agent.id} is not an ancestor of subagent ${childId}; only the agents that (transitively) started it may interrupt it`)
    }
    const parsed = parseDescriptor(header.descriptor)
    if ('problem' in parsed) throw notResumable(childId, `it is not a continuable subagent (${parsed.problem})`)
    // Not in memory: nothing runs, so there is nothing to stop (an idle child ignores a cancel).
    this.resident.get(childId)?.interrupt(new SubagentError('ABORTED', `subagent ${childId} was interrupted`))
  }

  reportFrom(child: Agent, output: string | TextBlock[]): string {
    const resident = this.resident.get(child.id)
    if (!resident || resident.body.kind !== 'agent' || resident.body.agent !== child) throw unauthorized(`agent ${child.id} is not a live continuable child; only continuable children report to the agent that started them`)
    const content: TextBlock[] = typeof output === 'string' ? [{ type: 'text', text: output }] : output
    const { parent } = resident
    if (!this.requireTasks().notices.post(parent, reportMessage(child.id, content), { durable: true })) {
      throw new SubagentError('PARENT_DISPOSED', `the parent ${parent.id} of subagent ${child.id} is ${parent.status}; the report cannot be delivered`)
    }
    return this.nextMessageId()
  }

  listChildren(parentId: string, signal?: AbortSignal): Promise<ContinuableChildInfo[]> {
    return listChildren(this.host.sessions(), parentId, (id) => this.isResidentRunning(id), signal)
  }

  listDescendants(rootId: string, signal?: AbortSignal): Promise<ContinuableChildInfo[]> {
    return listDescendants(this.host.sessions(), rootId, (id) => this.isResidentRunning(id), signal)
  }

  /** Some continuable child below `owner` is running a turn or has follow-ups waiting (or is being brought back to run them). */
  hasLive(owner: string): boolean {
    if (this.resuming.has(owner)) return true
    for (const child of this.resident.values()) {
      if (child.running && this.isBelow(child, owner)) return true
    }
    return false
  }

  /** Resolves at the next settlement of any continuable child's turn. */
  whenSettled(owner: string): Promise<void> {
    if (!this.hasLive(owner)) return Promise.resolve()
    return new Promise((resolve) => this.settledWaiters.push(resolve))
  }

  /**
   * `parent` resumed its session: its continuable children that had messages queued when
   * the last process ended are brought back, and run them (FIFO, one turn each).
   */
  resumed(parent: Agent): void {
    const sessions = this.host.sessions()
    if (sessions.storageName === undefined || this.host.tasks() === undefined || this.resuming.has(parent.id)) return
    const resuming = this.resumePending(parent, sessions)
      .catch((error: unknown) => this.host.home.logger('subagents').warn('bringing back the children of %s failed: %s', parent.id, errorMessage(error)))
      .finally(() => {
        this.resuming.delete(parent.id)
        this.wakeWaiters()
      })
    this.resuming.set(parent.id, resuming)
  }

  private async resumePending(parent: Agent, sessions: SessionStore): Promise<void> {
    const children = await listChildren(sessions, parent.id, (id) => this.isResidentRunning(id))
    for (const child of children) {
      if (this.resident.has(child.childId)) continue
      const stored = await sessions.readStored(child.childId).catch(() => undefined)
      if (!stored || pendingMessages(stored.events).length === 0) continue
      // Made resident, it runs what it had queued; a child that cannot come back says why in the log.
      await this.coldResume(parent, child.childId, undefined).catch((error: unknown) =>
        this.host.home.logger('subagents').warn('subagent %s had messages queued but could not be brought back: %s', child.childId, errorMessage(error)),
      )
    }
  }

  /**
   * Stop every continuable child below `owner` that runs: its queued follow-ups are
   * dropped and its running turn ends `aborted`, without notices. The children stay
   * resumable. Resolves once none of them runs.
   */
  async killAll(owner: string, reason: string): Promise<void> {
    const stopping = [...this.resident.values()].filter((child) => child.running && this.isBelow(child, owner))
    await Promise.all(stopping.map((child) => child.stop(new SubagentError('ABORTED', reason))))
    this.wakeWaiters()
  }

  /**
   * `parent` is being disposed: dispose its resident children (child-first, so none
   * outlives it) and forget everything held for it.
   */
  disposeChildrenOf(parent: Agent): Promise<void> | undefined {
    // Every agent's disposal passes here: one without continuable children (every child of
    // a plain fan-out) must not pay for a copy of the resident table or a promise.
    if (this.resident.size === 0) return undefined
    const children: ResidentChild[] = []
    for (const child of this.resident.values()) if (child.parentId === parent.id) children.push(child)
    if (children.length === 0) return undefined
    return Promise.all(children.map((child) => this.disposeChild(child))).then(() => {})
  }

  // ---- internals ----

  private requireAgents(): AgentRegistry {
    const agents = this.host.agents()
    if (!agents) throw new SubagentError('CONTINUATION_UNAVAILABLE', 'continuable children need ctx.agents (load @dsh/agent)')
    return agents
  }

  private requireTasks(): TaskService {
    const tasks = this.host.tasks()
    if (!tasks) {
      throw new SubagentError('CONTINUATION_UNAVAILABLE', 'continuable children need ctx.tasks (load @dsh/tasks): it delivers their notices and knows when their parent is quiet')
    }
    return tasks
  }

  private isResidentRunning(id: string): boolean {
    return this.resident.get(id)?.running === true
  }

  private async refuseTakenId(childId: string, sessions: SessionStore, agents: AgentRegistry): Promise<void> {
    if (typeof childId !== 'string' || !/^[A-Za-z0-9._-]{1,128}$/.test(childId)) {
      throw new SubagentError('INVALID_REQUEST', `a reserved child id must be 1-128 letters, digits, '.', '_' or '-' (got ${JSON.stringify(childId)})`)
    }
    if (this.resident.has(childId) || this.materialising.has(childId) || agents.get(childId) || sessions.get(childId)) {
      throw new SubagentError('DUPLICATE_CHILD', `a child with id ${childId} is already live; reserve another id or send it a message instead`)
    }
    const stored = await sessions.readStored(childId).catch(() => 'unreadable' as const)
    if (stored !== undefined) throw new SubagentError('DUPLICATE_CHILD', `a session with id ${childId} is already stored; reserve another id or send it a message instead`)
  }

  /** The continuable set-ups, in every continuable in-process child; returns the tool names they registered. */
  private setUp(childCtx: Context, agent: Agent): string[] {
    const kept: string[] = []
    for (const setup of this.host.setups()) kept.push(...(setup(childCtx, agent) ?? []))
    return kept
  }

  /** Create (or cold-resume) a child under a per-child lock and make it resident. */
  private async materialise(lockId: string, create: () => Promise<ResidentChild>): Promise<ResidentChild> {
    const making = (async () => {
      try {
        return await create()
      } catch (error) {
        if (error instanceof SubagentError) throw error
        throw new SubagentError('START_FAILED', `the continuable child could not be created: ${errorMessage(error)}`, { cause: error })
      }
    })()
    this.materialising.set(lockId, making)
    try {
      return await making
    } finally {
      this.materialising.delete(lockId)
    }
  }

  private makeResident(session: Session, parent: Agent, descriptor: ContinuableDescriptor, body: ResidentBody): ResidentChild {
    const child = new ResidentChild(parent, descriptor, session, body, this.residentEvents)
    this.resident.set(child.childId, child)
    // The parent reads its notices at every step from now on.
    this.host.tasks()?.notices.attach(parent)
    child.runQueued()
    return child
  }

  private turnStarted(child: ResidentChild): void {
    const { descriptor } = child
    const run: SubagentRunInfo = { runId: this.host.nextRunId(), provider: descriptor.provider, id: child.childId, local: child.body.kind === 'agent', parentId: child.parentId, label: descriptor.label, continuable: true }
    // A helper's child names its helper in every turn's start, as a one-shot run does.
    const helper = child.session.header.helper?.name
    if (helper !== undefined) run.helper = helper
    this.runs.set(child.childId, run)
    this.host.announce('start', run)
    const channel = this.host.openProgress()
    if (channel === undefined) return
    channel.bind(run)
    const { body } = child
    // An in-process child's progress is read from its session; a remote one's driver hands
    // the channel to the conversation for this turn.
    if (body.kind === 'agent') this.progress.set(child.childId, { channel, unfollow: followLocalChild(child.session, channel) })
    else {
      body.driver.progress = channel
      this.progress.set(child.childId, { channel })
    }
  }

  /** Close the current turn's progress (its last updates go out before `subagent/end`). */
  private closeProgress(child: ResidentChild): void {
    const progress = this.progress.get(child.childId)
    if (progress === undefined) return
    this.progress.delete(child.childId)
    progress.unfollow?.()
    progress.channel.close()
    if (child.body.kind === 'remote' && child.body.driver.progress === progress.channel) child.body.driver.progress = undefined
  }

  /** A turn of `child` ended: tell its parent (unless its owner asked to stop), announce it, wake waiters. */
  private turnEnded(child: ResidentChild, settlement: TurnSettlement): void {
    const { stopReason, closing, error } = settlement
    if (!settlement.quiet) this.notify(child.parent, settlementNotice(child.childId, stopReason, closing, stopReason === 'completed' ? undefined : error))
    this.closeProgress(child)
    const run = this.runs.get(child.childId)
    if (run) {
      this.runs.delete(child.childId)
      const end: SubagentRunEndInfo = { ...run, stopReason }
      // Called while the turn's `turn/end` is the session's last event: the walk reads this turn only.
      const usage = latestTurnUsage(child.session)
      if (usage !== undefined) end.usage = usage
      if (error !== undefined && stopReason !== 'completed') end.diagnostic = error
      if (closing.length > 0) end.lastAssistantMessage = closing.map((block) => ({ type: 'text', text: block.text }))
      this.host.announce('end', end)
    }
    this.wakeWaiters()
  }

  /** A notice for `parent`, durable until it takes it; one for a parent that is going is dropped (logged). */
  private notify(parent: Agent, message: UserMessage): void {
    if (this.host.tasks()?.notices.post(parent, message, { durable: true })) return
    this.host.home.logger('subagents').info('a subagent notice for %s was dropped: the parent is %s', parent.id, parent.status)
  }

  private deliver(child: ResidentChild, message: UserMessage): string {
    child.deliver(message)
    return this.nextMessageId()
  }

  private async disposeChild(child: ResidentChild): Promise<void> {
    try {
      try {
        await child.dispose()
      } finally {
        // A remote child's record is a session the manager opened: it releases it too.
        if (child.body.kind === 'remote') await this.host.sessions().release(child.session)
      }
    } finally {
      if (this.resident.get(child.childId) === child) this.resident.delete(child.childId)
      this.closeProgress(child)
      this.runs.delete(child.childId)
      this.wakeWaiters()
    }
  }

  /** A remote child: its record is a local session of this process, announced once the child exists. */
  private async startRemote(conversation: RemoteConversation, start: RemoteStart & { prompt: TextBlock[] }): Promise<ContinuableStarted> {
    const { session, descriptor, driver } = await recordRemoteChild(this.host.sessions(), conversation, start, this.faultLog(start.childId))
    const child = this.makeResident(session, start.parent, descriptor, { kind: 'remote', driver })
    return { childId: child.childId, messageId: this.deliver(child, { role: 'user', content: start.prompt }) }
  }

  private faultLog(childId: string): (error: unknown) => void {
    return (error) => this.host.home.logger('subagents').warn('remote child %s: %s', childId, errorMessage(error))
  }

  private async coldResume(parent: Agent, childId: string, signal: AbortSignal | undefined): Promise<ResidentChild> {
    const pending = this.materialising.get(childId)
    if (pending) {
      const child = await pending
      assertParent(child.parentId, parent, childId)
      return child
    }
    const agents = this.requireAgents()
    this.requireTasks()
    const sessions = this.host.sessions()
    if (sessions.storageName === undefined) throw notResumable(childId, 'no session storage is loaded, so it cannot be read back')
    let header: SessionHeader
    try {
      const stored = await sessions.readStored(childId)
      if (!stored) throw notResumable(childId, 'there is no such child (no stored session has this id); list_agents shows your children')
      header = stored.header
    } catch (error) {
      if (error instanceof SubagentError) throw error
      throw notResumable(childId, `its session cannot be read: ${errorMessage(error)}`)
    }
    if (signal?.aborted) throw new SubagentError('ABORTED', `the message to subagent ${childId} was cancelled`, { cause: signal.reason })
    assertParent(header.parentSession, parent, childId)
    const parsed = parseDescriptor(header.descriptor)
    if ('problem' in parsed) throw notResumable(childId, parsed.problem)
    const { descriptor } = parsed
    if (descriptor.remote) return this.resumeRemote(parent, header, descriptor, descriptor.remote, signal)
    return this.materialise(childId, async () => {
      let agent: Agent
      try {
        const { model, persona, toolFilter } = descriptor
        agent = await resumeInProcessChild(
          agents,
          childId,
          { parent, ...(model !== undefined && { agentOptions: { model } }), ...(persona !== undefined && { persona }), ...(toolFilter && { toolFilter }), ...(signal && { signal }) },
          (childCtx, created) => this.setUp(childCtx, created),
        )
      } catch (error) {
        throw notResumable(childId, `its session could not be reopened: ${errorMessage(error)}`)
      }
      return this.makeResident(agent.session, parent, descriptor, { kind: 'agent', agent })
    })
  }

  /** Reopen a remote child's conversation through its provider, then its record. */
  private resumeRemote(parent: Agent, header: SessionHeader, descriptor: ContinuableDescriptor, remote: NonNullable<ContinuableDescriptor['remote']>, signal: AbortSignal | undefined): Promise<ResidentChild> {
    const childId = header.id
    const provider = this.host.provider(descriptor.provider)
    if (!provider?.resumeContinuable) {
      throw notResumable(childId, provider ? `its provider "${descriptor.provider}" cannot reopen a conversation` : `its provider "${descriptor.provider}" is not registered`)
    }
    const resume = provider.resumeContinuable.bind(provider)
    const record: RemoteChildRecord = {
      childId,
      parentId: parent.id,
      depth: header.delegationDepth ?? parent.depth + 1,
      remoteId: remote.remoteId,
      descriptor,
      ...(remote.resumeData && { resumeData: remote.resumeData }),
    }
    return this.materialise(childId, async () => {
      const reopened = await reopenRemoteChild(this.host.sessions(), resume, record, signal, this.faultLog(childId))
      if ('problem' in reopened) throw notResumable(childId, reopened.problem)
      return this.makeResident(reopened.session, parent, descriptor, { kind: 'remote', driver: reopened.driver })
    })
  }

  /** Whether `owner` is `child`'s parent or an ancestor of it, through resident children and live agents. */
  private isBelow(child: ResidentChild, owner: string): boolean {
    let current: string | undefined = child.parentId
    const seen = new Set<string>()
    while (current !== undefined && !seen.has(current)) {
      if (current === owner) return true
      seen.add(current)
      current = this.resident.get(current)?.parentId ?? this.host.agents()?.get(current)?.session.header.parentSession
    }
    return false
  }

  private wakeWaiters(): void {
    const waiters = this.settledWaiters
    this.settledWaiters = []
    for (const resolve of waiters) resolve()
  }

  private nextMessageId(): string {
    return `msg-${this.messagePrefix}-${++this.messageCounter}`
  }
}
