import type { Context, Fiber } from 'cordis'
import { userText, type UserMessage } from '@dsh/llm'
import type { Session } from '@dsh/session'
import { AGENT_SCOPE } from '@dsh/tools'
import type { Agent, AgentOptions, AgentStatus, TurnDriver, TurnResult, TurnRuntime } from './types.js'

export class AgentDisposedError extends Error {
  override name = 'AgentDisposedError'
}

interface QueuedTurn {
  /** Absent for a turn woken by `steer`: its input is whatever the inbox holds. */
  message?: UserMessage
  /** Set for `recordAbort`: no steps run; the turn is logged as ended `aborted` with this text. */
  abortedWith?: string
  resolve(result: TurnResult): void
  reject(error: Error): void
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

/**
 * An agent: a session, an inbox, and a queue of turns run one at a time by the turn
 * driver. Its scoped context is created only when someone asks for it, so a child that
 * never registers anything costs no framework fiber.
 */
export class LiveAgent implements Agent {
  private _status: AgentStatus = 'idle'
  private queue: QueuedTurn[] = []
  private inbox: UserMessage[] = []
  /** Set by `steer` (not `inject`): pending input should start a turn if none is running. */
  private wakeRequested = false
  /** A cancel that arrived before its turn started: applied to that turn's signal. */
  private pendingCancel: unknown
  private controller: AbortController | undefined
  private draining: Promise<void> | undefined
  private fiber: Fiber | undefined
  private scopedCtx: Context | undefined
  private disposal: Promise<void> | undefined
  private turnCounter: number
  private readonly runtime: TurnRuntime

  constructor(
    readonly session: Session,
    readonly options: Readonly<AgentOptions>,
    private readonly host: AgentHost,
    readonly parent?: Agent,
  ) {
    this.turnCounter = countTurns(session)
    const agent = this
    this.runtime = {
      agent,
      get system() {
        return host.system(agent)
      },
      maxSteps: options.maxSteps ?? host.maxSteps,
      nextTurnNumber: () => ++this.turnCounter,
      claimInbox: () => {
        this.wakeRequested = false
        return this.inbox.splice(0)
      },
      hasInbox: () => this.inbox.length > 0,
    }
  }

  get id(): string {
    return this.session.id
  }

  get status(): AgentStatus {
    return this._status
  }

  get depth(): number {
    return this.session.header.delegationDepth ?? 0
  }

  get ctx(): Context {
    if (!this.scopedCtx) {
      if (this._status === 'disposed') throw new AgentDisposedError(`agent ${this.id} is disposed`)
      this.fiber = this.host.home.plugin({ name: `agent:${this.id}`, inject: ['sessions', 'tools', 'llm', 'agents'], apply() {} })
      this.scopedCtx = this.fiber.ctx.extend({ [AGENT_SCOPE]: this.id })
    }
    return this.scopedCtx
  }

  followup(message: UserMessage | string): Promise<TurnResult> {
    this.assertLive()
    return new Promise<TurnResult>((resolve, reject) => {
      this.queue.push({ message: asMessage(message), resolve, reject })
      this.pump()
    })
  }

  steer(message: UserMessage | string): void {
    this.assertLive()
    this.inbox.push(asMessage(message))
    this.wakeRequested = true
    if (this._status === 'idle' && this.queue.length === 0) {
      this.queue.push({ resolve: () => {}, reject: () => {} })
      this.pump()
    }
  }

  inject(message: UserMessage | string): void {
    this.assertLive()
    this.inbox.push(asMessage(message))
  }

  recordAbort(why: string): Promise<TurnResult> {
    this.assertLive()
    return new Promise<TurnResult>((resolve, reject) => {
      this.queue.push({ abortedWith: why, resolve, reject })
      this.pump()
    })
  }

  cancel(cause?: unknown): void {
    if (this.controller) this.controller.abort(cause ?? new Error('cancelled'))
    // A turn queued but not started yet is the one being cancelled: it must not run.
    else if (this.queue.length > 0) this.pendingCancel = cause ?? new Error('cancelled')
  }

  whenIdle(): Promise<void> {
    return this.draining ?? Promise.resolve()
  }

  dispose(): Promise<void> {
    this.disposal ??= this.runDisposal()
    return this.disposal
  }

  /** Dispose the scoped context, if one was created. */
  async releaseContext(): Promise<void> {
    const fiber = this.fiber
    this.fiber = undefined
    if (fiber) await fiber.dispose()
  }

  private async runDisposal(): Promise<void> {
    if (this._status === 'disposed') return
    this._status = 'disposing'
    const dropped = this.queue.splice(0)
    for (const turn of dropped) turn.reject(new AgentDisposedError(`agent ${this.id} was disposed before this turn started`))
    // An Error captures a stack trace: only pay for one when there is a turn to abort.
    if (this.controller) this.cancel(new AgentDisposedError(`agent ${this.id} is being disposed`))
    await this.whenIdle()
    try {
      await this.host.finish(this)
    } finally {
      this._status = 'disposed'
    }
  }

  private logAbortedTurn(why: string): TurnResult {
    return abortedTurn(this.session, this.runtime.nextTurnNumber(), why)
  }

  private assertLive(): void {
    if (this._status === 'disposing' || this._status === 'disposed') throw new AgentDisposedError(`agent ${this.id} is ${this._status}`)
  }

  private pump(): void {
    if (this.draining) return
    this.draining = this.drain()
  }

  private async drain(): Promise<void> {
    // Yield once so a caller can attach to the turn (subscribe, store the promise) before it starts.
    await Promise.resolve()
    for (;;) {
      if (this.queue.length === 0 || this._status === 'disposing') {
        // Cleared in the same tick the queue is found empty: a followup queued by a caller
        // that resumed on the last turn's result must start a new drain, not be stranded.
        this.draining = undefined
        return
      }
      const next = this.queue.shift()!
      this._status = 'running'
      const controller = (this.controller = new AbortController())
      if (this.pendingCancel !== undefined) {
        controller.abort(this.pendingCancel)
        this.pendingCancel = undefined
      }
      try {
        const result =
          next.abortedWith === undefined
            ? await this.host.driver().runTurn(this.runtime, next.message ? [next.message] : [], controller.signal)
            : this.logAbortedTurn(next.abortedWith)
        next.resolve(result)
      } catch (error) {
        next.reject(error instanceof Error ? error : new Error(String(error)))
      } finally {
        this.controller = undefined
        if (this._status === 'running') this._status = 'idle'
      }
      // input steered in after the last step of a turn starts a new one
      if (this.queue.length === 0 && this.wakeRequested && this.inbox.length > 0 && this._status === 'idle') {
        this.queue.push({ resolve: () => {}, reject: () => {} })
      }
    }
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
