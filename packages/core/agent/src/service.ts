import { Context, Service } from 'cordis'
import Schema from 'schemastery'
import { errorMessage } from '@dsh/base'
import type { Session } from '@dsh/session'
import type {} from '@dsh/tools'
import type {} from '@dsh/llm'
import { LiveAgent, type AgentHost, type ComposedPromptCache } from './live-agent.js'
import { serviceInstance } from './service-instance.js'
import { closeInterruptedTurn } from './interrupted-turn.js'
import type { Agent, AgentCleanup, AgentResumeListener, CreateAgentOptions, TurnDriver } from './types.js'
import { AgentError } from './errors.js'
import { checkSection, composePrompt, sortSections, ENVIRONMENT_ORDER, PERSONA_ORDER, renderEnvironment, type ComposedPrompt, type PromptSection } from './prompt-sections.js'

declare module 'cordis' {
  interface Context {
    agents: AgentRegistry
    agentLoop: TurnDriver
  }
}

declare module '@dsh/tools' {
  interface ToolAgent extends Agent {}
}

export const DEFAULT_PERSONA =
  'You are dsh, a careful software agent. Use the tools you are given when they help, and answer concisely.'

/**
 * `ctx.agents`: creates agents, tracks the live ones, and runs the cleanups that let
 * owned work (background tasks) drain before an agent's session is released.
 */
export class AgentRegistry extends Service {
  static inject = ['sessions', 'tools', 'llm', 'agentLoop']
  static Config: Schema<AgentRegistry.Config> = Schema.object({
    persona: Schema.string().default(DEFAULT_PERSONA).description('Deployment persona: the head of every agent\'s system prompt.'),
    maxSteps: Schema.natural().min(1).default(50).description('Most steps one turn may take.'),
  })

  private live = new Map<string, LiveAgent>()
  private cleanups: AgentCleanup[] = []
  private resumeListeners: AgentResumeListener[] = []
  private sections: PromptSection[] = []
  /** Bumped whenever a section comes or goes: cached prompts are then composed anew. */
  private sectionsVersion = 0
  /** Each agent's composed prompt and what it was composed from (sections, visible tools). */
  private prompts = new WeakMap<Agent, ComposedPromptCache>()
  /** The sections sorted for rendering, as of `version` (a `sectionsVersion`). */
  private ordered: { version: number; sections: readonly PromptSection[] } | undefined
  private readonly host: AgentHost
  /**
   * This service's own context. `this.ctx` is the caller's context (services are reached
   * through proxies), which need not have injected the sessions or tools services.
   */
  private readonly home: Context

  /** The services every create and dispose uses, held directly (see `serviceInstance`). */
  private readonly sessions: Context['sessions']
  private readonly tools: Context['tools']

  constructor(ctx: Context, public config: AgentRegistry.Config) {
    super(ctx, 'agents')
    const home = (this.home = ctx)
    this.sessions = serviceInstance(ctx.sessions)
    this.tools = serviceInstance(ctx.tools)
    // This service restarts when its injected services are replaced, so holding them is safe.
    const driver = serviceInstance(ctx.agentLoop)
    this.host = {
      home,
      driver: () => driver,
      system: (agent) => this.systemPrompt(agent),
      maxSteps: config.maxSteps,
      finish: (agent) => this.finish(agent),
    }
    // Agents live only as long as their registry: unloading it (or replacing a service it
    // needs) disposes them rather than leaving turns running against released services.
    this.addPromptSection({ name: 'persona', order: PERSONA_ORDER, render: (agent) => agent.options.persona ?? this.config.persona })
    this.addPromptSection({ name: 'environment', order: ENVIRONMENT_ORDER, render: renderEnvironment })
    ctx.effect(() => () => Promise.allSettled([...this.live.values()].map((agent) => agent.dispose())).then(() => {}), 'agents: dispose live agents')
  }

  create(options: CreateAgentOptions = {}): Promise<Agent> {
    // As from an async function: a refused creation rejects, it is not thrown at the caller
    // (caught here rather than by rejectOnThrow, which would make a closure per agent).
    try {
      return this.createChecked(options)
    } catch (error) {
      return Promise.reject(error)
    }
  }

  /** `create`'s checks, then a fresh agent made synchronously, or the async path when it must wait. */
  private createChecked(options: CreateAgentOptions): Promise<Agent> {
    const { signal } = options
    throwIfAborted(signal, 'before the agent was created')
    if (options.sessionId !== undefined && options.seed) throw new AgentError('INVALID_OPTIONS', 'an agent resumes a session or is seeded, not both')
    // A resume waits for storage and a setup may wait for anything: only those take the
    // async path. A fresh agent without setup (most children of a fan-out) is made here,
    // synchronously, with no frame or tick of its own.
    if (options.sessionId !== undefined || options.setup) return this.createAfterWaits(options)
    const session = this.freshSession(options)
    const agent = new LiveAgent(session, { ...options.agentOptions }, this.host, options.parent)
    try {
      // Persisted only once the agent is sure to exist: a rolled-back start leaves no file.
      this.sessions.announce(session)
    } catch (error) {
      return this.rolledBack(agent, error)
    }
    this.live.set(agent.id, agent)
    return Promise.resolve(agent)
  }

  /** `create` for an agent that resumes a stored session or has a setup to run. */
  private async createAfterWaits(options: CreateAgentOptions): Promise<Agent> {
    const { signal } = options
    const fresh = options.sessionId === undefined
    // A fresh session is made synchronously: only a resume waits for storage.
    const session = fresh ? this.freshSession(options) : await this.resumedSession(options.sessionId!)
    const agent = new LiveAgent(session, { ...options.agentOptions }, this.host, options.parent)
    try {
      if (options.setup) await options.setup(agent.ctx, agent)
      throwIfAborted(signal, 'while the agent was being set up')
      // Persisted only once the agent is sure to exist: a rolled-back start leaves no file.
      if (fresh) this.sessions.announce(session)
    } catch (error) {
      return this.rolledBack(agent, error)
    }
    this.live.set(agent.id, agent)
    if (!fresh) this.resumed(agent)
    return agent
  }

  /** Tell every resume listener; one that throws is logged and stops nobody. */
  private resumed(agent: Agent): void {
    for (const listener of this.resumeListeners) {
      try {
        listener(agent)
      } catch (error) {
        this.home.logger('agents').warn('a resume listener failed for agent %s (ignored): %s', agent.id, errorMessage(error))
      }
    }
  }

  /** Dispose an agent whose creation failed with `error`, then reject with it. */
  private async rolledBack(agent: LiveAgent, error: unknown): Promise<never> {
    await agent.dispose().catch((cleanupError: unknown) => {
      this.home.logger('agents').warn('rolling back agent %s failed: %s', agent.id, errorMessage(cleanupError))
    })
    throw error
  }

  get(id: string): Agent | undefined {
    return this.live.get(id)
  }

  list(): Agent[] {
    return [...this.live.values()]
  }

  /** Register work to await while any agent is disposed (before its session is released). */
  onCleanup(cleanup: AgentCleanup): () => void {
    return this.ctx.effect(() => {
      this.cleanups = [...this.cleanups, cleanup]
      return () => {
        this.cleanups = this.cleanups.filter((entry) => entry !== cleanup)
      }
    }, 'agents.onCleanup()')
  }

  /**
   * `listener(agent)` runs for every agent that resumes a stored or live session, once it is
   * visible, before `create` resolves: work accepted for it by an earlier process (durable
   * notices, queued messages) picks it up here. Never for a fresh agent. An effect.
   */
  onResume(listener: AgentResumeListener): () => void {
    return this.ctx.effect(() => {
      this.resumeListeners = [...this.resumeListeners, listener]
      return () => {
        this.resumeListeners = this.resumeListeners.filter((entry) => entry !== listener)
      }
    }, 'agents.onResume()')
  }

  /**
   * Contribute a section to every agent's system prompt; an effect of the calling plugin
   * (gone when it unloads). A duplicate name throws: sections are addressed by name.
   */
  addPromptSection(section: PromptSection): () => void {
    checkSection(section)
    const entry: PromptSection = { ...section }
    return this.ctx.effect(() => {
      if (this.sections.some((existing) => existing.name === entry.name)) {
        throw new AgentError('INVALID_OPTIONS', `a prompt section named "${entry.name}" is already registered; give this one another name`)
      }
      this.sections = [...this.sections, entry]
      this.sectionsVersion++
      return () => {
        this.sections = this.sections.filter((existing) => existing !== entry)
        this.sectionsVersion++
      }
    }, `agents.addPromptSection(${JSON.stringify(entry.name)})`)
  }

  /** Names of the registered sections, in render order. */
  promptSections(): string[] {
    return this.orderedSections().map((section) => section.name)
  }

  /**
   * `agent`'s system prompt with its parts. It is composed again only when a section
   * comes or goes or the agent's visible tools change, so it stays byte-for-byte stable
   * across turns. Sections that throw are left out and logged once per composition.
   */
  composeSystemPrompt(agent: Agent): ComposedPrompt {
    // The registry hands out the same sorted list until it changes: comparing by identity
    // first keeps the per-step check free of allocations.
    const visible = this.tools.visibleNames(agent.id)
    // An agent of this registry carries its own cache entry (a WeakMap entry costs the
    // garbage collector more than a field); any other agent object is looked up.
    const cached = agent instanceof LiveAgent ? agent.composedPrompt : this.prompts.get(agent)
    if (cached && cached.sectionsVersion === this.sectionsVersion && (cached.visible === visible || sameNames(cached.visible, visible))) {
      cached.visible = visible
      return cached.prompt
    }
    const prompt = this.forkedPrompt(agent, composePrompt(this.orderedSections(), agent, visible))
    for (const failure of prompt.failures) {
      this.home.logger('agents').warn('prompt section "%s" failed for agent %s and was left out: %s', failure.name, agent.id, failure.error)
    }
    const entry: ComposedPromptCache = { sectionsVersion: this.sectionsVersion, visible, prompt }
    if (agent instanceof LiveAgent) agent.composedPrompt = entry
    else this.prompts.set(agent, entry)
    return prompt
  }

  /** The sections in render order, sorted once per change rather than once per agent. */
  private orderedSections(): readonly PromptSection[] {
    if (this.ordered?.version !== this.sectionsVersion) this.ordered = { version: this.sectionsVersion, sections: sortSections(this.sections) }
    return this.ordered.sections
  }

  /**
   * A fork child (seeded from its parent's session) is sent its parent's prompt, byte for
   * byte, when its own would hold the same sections: the provider's prefix cache then
   * serves the whole shared history. Only the environment's date could differ (a fork
   * made after midnight), and a day's difference is not worth re-reading the history for.
   * A child that would get other sections (another persona, a tool filter, the depth
   * bound reached) keeps its own prompt: what it is told must stay true.
   */
  private forkedPrompt(agent: Agent, own: ComposedPrompt): ComposedPrompt {
    const { parent } = agent
    // Most children are not forks: their log has no seed, and nothing else need be read.
    if (!parent || agent.session.seedLength === 0) return own
    const { seedLength, parentSession } = agent.session.header
    if (!seedLength || parent.id !== parentSession || parent.status === 'disposed') return own
    const inherited = this.composeSystemPrompt(parent)
    const sameSections = inherited.parts.length === own.parts.length && inherited.parts.every((part, index) => part.name === own.parts[index]!.name)
    const samePersona = inherited.parts.find((part) => part.name === 'persona')?.text === own.parts.find((part) => part.name === 'persona')?.text
    return sameSections && samePersona ? { ...inherited, failures: own.failures } : own
  }

  systemPrompt(agent: Agent): string {
    return this.composeSystemPrompt(agent).text
  }

  private freshSession(options: CreateAgentOptions): Session {
    // The seed and announce beside the meta, not merged into a copy of it: a fan-out would pay the copy per child.
    return this.sessions.create(options.meta, { seed: options.seed, announce: false })
  }

  private async resumedSession(sessionId: string): Promise<Session> {
    const session = await this.sessions.open(sessionId)
    if (this.live.has(session.id)) throw new AgentError('SESSION_IN_USE', `session ${session.id} already has a live agent`)
    if (closeInterruptedTurn(session)) this.home.logger('agents').warn('session %s was interrupted mid-turn; that turn is now closed as an error', session.id)
    return session
  }

  /**
   * Disposal steps the registry owns: cleanups, the agent's context, its tools, its
   * session, its entry. Synchronous until something returns a promise: most children of a
   * fan-out have cleanups with nothing to wait for and no context, and an async function
   * here would cost each of them a suspended frame and its ticks.
   */
  private finish(agent: LiveAgent): Promise<void> {
    const cleanups = this.cleanups
    let errors: unknown[] | undefined
    for (let index = 0; index < cleanups.length; index++) {
      let pending: Promise<void> | void
      try {
        pending = cleanups[index](agent)
      } catch (error) {
        ;(errors ??= []).push(error)
        continue
      }
      // Most cleanups have nothing to wait for (a child without background work or
      // children of its own): awaiting their `undefined` would still cost a tick each.
      if (pending !== undefined) return this.finishAfterWaits(agent, cleanups.slice(index + 1), pending, errors ?? [])
    }
    if (agent.holdsContext) return this.finishAfterWaits(agent, [], undefined, errors ?? [])
    return this.releaseAndDeregister(agent, errors)
  }

  /** `finish` once a cleanup returned `pending`: the cleanups left, one at a time, then the rest. */
  private async finishAfterWaits(agent: LiveAgent, cleanupsLeft: readonly AgentCleanup[], pending: Promise<void> | undefined, errors: unknown[]): Promise<void> {
    if (pending !== undefined) {
      try {
        await pending
      } catch (error) {
        errors.push(error)
      }
    }
    for (const cleanup of cleanupsLeft) {
      try {
        const next = cleanup(agent)
        if (next !== undefined) await next
      } catch (error) {
        errors.push(error)
      }
    }
    if (agent.holdsContext) {
      try {
        await agent.releaseContext()
      } catch (error) {
        errors.push(error)
      }
    }
    await this.releaseAndDeregister(agent, errors)
  }

  /** The last disposal steps: forget the agent's tools, release its session, drop its entry; every failure reported. */
  private releaseAndDeregister(agent: LiveAgent, errors: unknown[] | undefined): Promise<void> {
    this.tools.forgetAgent(agent.id)
    let released: Promise<void>
    try {
      released = this.sessions.release(agent.session)
    } catch (error) {
      released = Promise.reject(error)
    }
    return released.then(
      () => this.deregister(agent, errors),
      (error: unknown) => this.deregister(agent, errors === undefined ? [error] : [...errors, error]),
    )
  }

  private deregister(agent: LiveAgent, errors: unknown[] | undefined): void {
    if (this.live.get(agent.id) === agent) this.live.delete(agent.id)
    if (errors === undefined || errors.length === 0) return
    if (errors.length === 1) throw errors[0]
    throw new AggregateError(errors, `disposing agent ${agent.id} failed`)
  }
}

function sameNames(a: readonly string[], b: readonly string[]): boolean {
  return a.length === b.length && a.every((name, index) => name === b[index])
}

function throwIfAborted(signal: AbortSignal | undefined, when: string): void {
  if (signal?.aborted) throw new AgentError('ABORTED', `agent creation was aborted ${when}`, { cause: signal.reason })
}

export namespace AgentRegistry {
  export interface Config {
    persona: string
    maxSteps: number
  }
}
