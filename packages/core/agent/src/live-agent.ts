import type { Context, Fiber } from 'cordis'
import { errorMessage } from '@dsh/base'
import { userText, type UserMessage } from '@dsh/llm'
import type { Session } from '@dsh/session'
import { AGENT_SCOPE } from '@dsh/tools'
import { AgentError } from './errors.js'
import type { ComposedPrompt } from './prompt-sections.js'
import type { Agent, AgentOptions, AgentStatus, InputBoundary, InputSource, TurnDriver, TurnResult, TurnRuntime } from './types.js'

/** A turn waiting to run. */
interface QueuedTurn {
  /** The turn's own input: a followup's message, or what the sources gave when the agent was woken. */
  input: UserMessage[]
  /** Set for `recordAbort`: no steps run; the turn is logged as ended `aborted` with this text. */
  abortedWith?: string
  /** A cancel that arrived before the turn started: its signal starts aborted. */
  cancelCause?: unknown
  resolve(result: TurnResult): void
  reject(error: Error): void
}

/**
 * Where an agent stands, in one value. `running` carries what only a running turn has;
 * the queue, the inbox and the wake flag are inputs waiting, not state.
 */
type AgentState =
  | { status: 'idle' }
  | { status: 'running'; controller: AbortController; turn: QueuedTurn }
  | { status: 'disposing' }
  | { status: 'disposed' }

/** A composed system prompt and what it was composed from (see `AgentRegistry.composeSystemPrompt`). */
export interface ComposedPromptCache {
  sectionsVersion: number
  visible: readonly string[]
  prompt: ComposedPrompt
}

/** What a live agent needs from the registry that created it. */
export interface AgentHost {
  /** The context agent contexts are forked from. */
  home: Context
  driver(): TurnDriver
  system(agent: Agent): string
  maxSteps: number
  /** Disposal steps the registry owns: cleanups, tool caches, session release, deregistration. */
  finish(agent: LiveAgent): Promise<void>
}

function asMessage(message: UserMessage | string): UserMessage {
  return typeof message === 'string' ? userText(message) : message
}

const ignoreResult = () => {}

/** The empty inbox every agent shares until it is given a message (frozen: a push into it would be a bug; see `ownInbox`). */
const NO_MESSAGES: UserMessage[] = Object.freeze([]) as unknown as UserMessage[]
const NO_SOURCES: readonly InputSource[] = Object.freeze([])

/** The idle state, shared: every agent starts in it and returns to it after each turn. */
const IDLE: AgentState = Object.freeze({ status: 'idle' })
/** The states of disposal, shared like `IDLE`: every child of a fan-out passes through both. */
const DISPOSING: AgentState = Object.freeze({ status: 'disposing' })
const DISPOSED: AgentState = Object.freeze({ status: 'disposed' })

/**
 * What the turn driver sees of a live agent: one small object per agent, its behaviour on
 * the prototype (closures and a getter in an object literal would be made anew per agent).
 */
class LiveTurnRuntime implements TurnRuntime {
  constructor(
    readonly agent: LiveAgent,
    private readonly host: AgentHost,
    readonly maxSteps: number,
  ) {}

  get system(): string {
    return this.host.system(this.agent)
  }

  nextTurnNumber(): number {
    return this.agent.takeTurnNumber()
  }

  claimInput(): UserMessage[] {
    return this.agent.claimStepInput()
  }

  hasInbox(): boolean {
    return this.agent.hasWaitingInput()
  }

  endingTurn(): void {
    this.agent.markTurnEnding()
  }
}

/**
 * An agent: a session, an inbox, input sources, and a queue of turns run one at a time by
 * the turn driver. Its scoped context is created only when someone asks for it, so a
 * child that never registers anything costs no framework fiber.
 *
 * Input reaches a turn at one point: the step boundary, where the driver claims the inbox
 * and polls every input source (`claimInput`). When a turn ends (unless it was aborted)
 * and when `wake` is called on an idle agent, the sources are polled once more: input they
 * give then starts a new turn. A `steer` sets the wake flag: steered input that no step
 * claimed starts a turn of its own, after any aborted turn too (a person asked for it).
 */
export class LiveAgent implements Agent {
  private state: AgentState = IDLE
  private queue: QueuedTurn[] = []
  // Most agents (every child of a fan-out) never get steered input or a source: they share
  // the frozen empty lists below until they do (sources are copied on write already).
  private inbox: UserMessage[] = NO_MESSAGES
  private sources: readonly InputSource[] = NO_SOURCES
  /** Set by `steer`: inbox input should start a turn if no step claims it first. */
  private steered = false
  /** Set by `wake` and by a turn that ended without an abort: poll the sources for a new turn. */
  private pollSources = false
  private draining: Promise<void> | undefined
  private fiber: Fiber | undefined
  private scopedCtx: Context | undefined
  private disposal: Promise<void> | undefined
  private turnCounter: number
  private readonly runtime: TurnRuntime
  /** The registry's cache of this agent's system prompt (kept here rather than in a WeakMap). */
  composedPrompt: ComposedPromptCache | undefined
  readonly root: Agent

  constructor(
    readonly session: Session,
    readonly options: Readonly<AgentOptions>,
    private readonly host: AgentHost,
    readonly parent?: Agent,
  ) {
    this.turnCounter = countTurns(session)
    this.runtime = new LiveTurnRuntime(this, host, options.maxSteps ?? host.maxSteps)
    // A parent's own root, read once: no walk up the tree when anyone asks for it.
    this.root = parent === undefined ? this : parent.root
  }

  *ancestors(): IterableIterator<Agent> {
    for (let above = this.parent; above !== undefined; above = above.parent) yield above
  }

  /** The next turn's number (see `TurnRuntime.nextTurnNumber`). For the turn runtime only. */
  takeTurnNumber(): number {
    return ++this.turnCounter
  }

  /** What a step boundary claims (see `TurnRuntime.claimInput`). For the turn runtime only. */
  claimStepInput(): UserMessage[] {
    this.steered = false
    // Most steps have nothing waiting: no copies then. A fresh empty list, not the shared
    // frozen one: `claimInput` hands it to a turn driver, which may be a plugin's and is
    // told it owns the list.
    if (this.inbox.length === 0 && this.sources.length === 0) return []
    const claimed = this.inbox.length > 0 ? this.inbox.splice(0) : []
    for (const message of this.poll('step')) claimed.push(message)
    return claimed
  }

  /** Whether steered or injected input waits. For the turn runtime only. */
  hasWaitingInput(): boolean {
    return this.inbox.length > 0
  }

  /** The running turn is logging its end: read `idle` from now on. For the turn runtime only. */
  markTurnEnding(): void {
    if (this.state.status === 'running') this.state = IDLE
  }

  get id(): string {
    return this.session.id
  }

  get status(): AgentStatus {
    return this.state.status
  }

  get depth(): number {
    return this.session.header.delegationDepth ?? 0
  }

  get ctx(): Context {
    if (!this.scopedCtx) {
      if (this.state.status === 'disposed') throw new AgentError('DISPOSED', `agent ${this.id} is disposed`)
      this.fiber = this.host.home.plugin({ name: `agent:${this.id}`, inject: ['sessions', 'tools', 'llm', 'agents'], apply() {} })
      this.scopedCtx = this.fiber.ctx.extend({ [AGENT_SCOPE]: this.id })
    }
    return this.scopedCtx
  }

  followup(message: UserMessage | string): Promise<TurnResult> {
    this.assertLive()
    return new Promise<TurnResult>((resolve, reject) => {
      this.queue.push({ input: [asMessage(message)], resolve, reject })
      this.pump()
    })
  }

  steer(message: UserMessage | string): void {
    this.assertLive()
    this.ownInbox().push(asMessage(message))
    this.steered = true
    this.pump()
  }

  inject(message: UserMessage | string): void {
    this.assertLive()
    this.ownInbox().push(asMessage(message))
  }

  /** The inbox to add to: this agent's own, made at its first message. */
  private ownInbox(): UserMessage[] {
    if (this.inbox === NO_MESSAGES) this.inbox = []
    return this.inbox
  }

  addInputSource(source: InputSource): () => void {
    this.assertLive()
    this.sources = [...this.sources, source]
    return () => {
      this.sources = this.sources.filter((entry) => entry !== source)
    }
  }

  wake(): void {
    if (this.state.status !== 'idle') return
    this.pollSources = true
    this.pump()
  }

  recordAbort(why: string): Promise<TurnResult> {
    this.assertLive()
    return new Promise<TurnResult>((resolve, reject) => {
      this.queue.push({ input: [], abortedWith: why, resolve, reject })
      this.pump()
    })
  }

  cancel(cause?: unknown): void {
    const why = cause ?? new Error('cancelled')
    if (this.state.status === 'running') this.state.controller.abort(why)
    // A turn queued but not started yet is the one being cancelled: it starts aborted.
    else if (this.queue.length > 0) this.queue[0].cancelCause ??= why
  }

  whenIdle(): Promise<void> {
    return this.draining ?? Promise.resolve()
  }

  dispose(): Promise<void> {
    this.disposal ??= this.runDisposal()
    return this.disposal
  }

  /** Whether a scoped context was created (and so must be released). */
  get holdsContext(): boolean {
    return this.fiber !== undefined
  }

  /** Dispose the scoped context, if one was created. */
  async releaseContext(): Promise<void> {
    const fiber = this.fiber
    this.fiber = undefined
    if (fiber) await fiber.dispose()
  }

  /**
   * Not an async function: every child of a fan-out is disposed, most with no turn left to
   * wait for, and a suspended frame with its ticks would be made for each.
   */
  private runDisposal(): Promise<void> {
    if (this.state.status === 'disposed') return Promise.resolve()
    const running = this.state.status === 'running' ? this.state.controller : undefined
    this.state = DISPOSING
    this.sources = NO_SOURCES
    if (this.queue.length > 0) {
      for (const turn of this.queue.splice(0)) turn.reject(new AgentError('DISPOSED', `agent ${this.id} was disposed before this turn started`))
    }
    // An Error captures a stack trace: only pay for one when there is a turn to abort.
    running?.abort(new AgentError('DISPOSED', `agent ${this.id} is being disposed`))
    const draining = this.draining
    return draining ? draining.then(() => this.finishDisposal()) : this.finishDisposal()
  }

  /** The registry's disposal steps; the agent reads `disposed` once they are over, failed or not. */
  private finishDisposal(): Promise<void> {
    // A throw becomes a rejection in place (rejectOnThrow would make a closure per agent).
    let finished: Promise<void>
    try {
      finished = this.host.finish(this)
    } catch (error) {
      finished = Promise.reject(error)
    }
    return finished.then(
      () => {
        this.state = DISPOSED
      },
      (error: unknown) => {
        this.state = DISPOSED
        throw error
      },
    )
  }

  private assertLive(): void {
    const { status } = this.state
    if (status === 'disposing' || status === 'disposed') throw new AgentError('DISPOSED', `agent ${this.id} is ${status}`)
  }

  /** Every source's input for this boundary. A source that throws gives nothing and is logged. */
  private poll(boundary: InputBoundary): UserMessage[] {
    const input: UserMessage[] = []
    for (const source of this.sources) {
      try {
        input.push(...source(boundary))
      } catch (error) {
        this.host.home.logger('agents').warn('an input source of agent %s threw (its input is skipped): %s', this.id, errorMessage(error))
      }
    }
    return input
  }

  private pump(): void {
    if (this.draining || this.state.status !== 'idle') return
    this.draining = this.drain()
  }

  /** The next turn: a queued one, else one that a steer or the sources ask for. */
  private nextTurn(): QueuedTurn | undefined {
    const queued = this.queue.shift()
    if (queued) return queued
    if (this.steered && this.inbox.length > 0) {
      // Its input is the inbox, claimed at the turn's first step with the sources'.
      this.pollSources = false
      return { input: [], resolve: ignoreResult, reject: ignoreResult }
    }
    this.steered = false
    if (!this.pollSources) return undefined
    this.pollSources = false
    const input = this.poll('wake')
    return input.length > 0 ? { input, resolve: ignoreResult, reject: ignoreResult } : undefined
  }

  private async drain(): Promise<void> {
    // Yield once so a caller can attach to the turn (subscribe, store the promise) before it starts.
    await Promise.resolve()
    for (;;) {
      const next = this.state.status === 'idle' ? this.nextTurn() : undefined
      if (!next) {
        // Cleared in the same tick no turn is found: a followup queued by a caller that
        // resumed on the last turn's result must start a new drain, not be stranded.
        this.draining = undefined
        return
      }
      const controller = new AbortController()
      if (next.cancelCause !== undefined) controller.abort(next.cancelCause)
      this.state = { status: 'running', controller, turn: next }
      try {
        const result =
          next.abortedWith === undefined
            ? await this.host.driver().runTurn(this.runtime, next.input, controller.signal)
            : this.logAbortedTurn(next.abortedWith)
        // A cancelled turn means "stop", and so does one a spent budget stopped: the sources
        // do not start another behind the user's (or the budget's) back.
        if (result.reason !== 'aborted' && result.reason !== 'budget') this.pollSources = true
        next.resolve(result)
      } catch (error) {
        next.reject(error instanceof Error ? error : new Error(errorMessage(error)))
      } finally {
        if (this.state.status === 'running') this.state = IDLE
      }
    }
  }

  private logAbortedTurn(why: string): TurnResult {
    this.runtime.endingTurn()
    return abortedTurn(this.session, this.runtime.nextTurnNumber(), why)
  }
}

/**
 * A turn with no steps that ends `aborted`: the durable record of a cancel that came after
 * the last real turn had ended (the agent has nothing running to abort).
 */
function abortedTurn(session: Session, turn: number, why: string): TurnResult {
  const started = session.append({ type: 'turn/start', turn })
  const ended = session.append({ type: 'turn/end', turn, reason: 'aborted', error: why })
  return { turn, reason: 'aborted', error: why, startSeq: started.seq, endSeq: ended.seq }
}

function countTurns(session: Session): number {
  let turns = 0
  for (const event of session.ownEvents()) if (event.type === 'turn/start') turns = event.turn
  return turns
}
