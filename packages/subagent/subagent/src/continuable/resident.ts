/**
 * A continuable child in memory: an agent of this process or a driven remote
 * conversation, its queue of accepted follow-ups (FIFO, one turn at a time), and the
 * watch on its session that reports each turn's start and end.
 *
 * The queue lives here, not in the agent's own inbox, so that stopping a child (its
 * owner's run was cancelled) can drop the follow-ups that have not started yet. It is
 * durable: each accepted message is recorded in the child's session (`input/queued`) and
 * marked when its turn begins or when it is dropped (`input/taken`), so messages accepted
 * before the process died run when the child is next brought back.
 */
import { errorMessage, type StopReason } from '@dsh/base'
import type { Agent } from '@dsh/agent'
import { selectOutput, type AssistantMessage, type TextBlock, type UserMessage } from '@dsh/llm'
import type { Session, SessionEvent } from '@dsh/session'
import type { RemoteChildDriver } from './remote-child.js'
import type { ContinuableDescriptor } from './types.js'

/** What the child is, in memory. */
export type ResidentBody = { kind: 'agent'; agent: Agent } | { kind: 'remote'; driver: RemoteChildDriver }

/** How a turn of the child ended, as its resident entry reports it. */
export interface TurnSettlement {
  stopReason: StopReason
  /** The turn's closing message (the shared output rule over its answers). */
  closing: TextBlock[]
  error?: string
  /** The turn was stopped by `stop` (its owner's run was cancelled): nobody is to be told. */
  quiet: boolean
}

/** What a resident child tells the manager. */
export interface ResidentEvents {
  turnStarted(child: ResidentChild): void
  turnEnded(child: ResidentChild, settlement: TurnSettlement): void
  /** The child's running state may have changed (a turn or a queued follow-up finished). */
  changed(): void
  /** `info` for what a user may miss (dropped messages), `debug` for the expected. */
  log(level: 'info' | 'debug', message: string): void
}

/** A follow-up accepted and not handed to the child yet, with its id in the child's session. */
interface Queued {
  id: string
  message: UserMessage
}

/** The messages a child's session holds as accepted and not yet taken, in the order they were accepted. */
export function pendingMessages(events: Iterable<SessionEvent>): Queued[] {
  const pending = new Map<string, UserMessage>()
  for (const event of events) {
    if (event.type === 'input/queued' && event.as === 'message') pending.set(event.id, event.message)
    else if (event.type === 'input/taken') for (const id of event.ids) pending.delete(id)
  }
  return [...pending].map(([id, message]) => ({ id, message }))
}

export class ResidentChild {
  /** Accepted follow-ups not handed to the body yet. */
  private readonly queue: Queued[]
  /** The turn handed to the body and not finished yet. */
  private inFlight: Promise<void> | undefined
  /** Set while `stop` runs: turns that end now send no notice, and the queue waits. */
  private silenced = false
  private disposed = false
  private readonly stopWatching: () => void

  constructor(
    readonly parent: Agent,
    readonly descriptor: ContinuableDescriptor,
    /** Its durable session: the agent's own, or a remote child's parent-side record. */
    readonly session: Session,
    readonly body: ResidentBody,
    private readonly events: ResidentEvents,
  ) {
    // What an earlier process accepted and never ran comes first (`runQueued` starts it).
    this.queue = pendingMessages(session.ownEvents())
    this.stopWatching = this.watchTurns()
  }

  /** Start on what was queued before this child was brought back, if anything. */
  runQueued(): void {
    this.pump()
  }

  get childId(): string {
    return this.session.id
  }

  get parentId(): string {
    return this.parent.id
  }

  /** A turn runs, or follow-ups wait for one. */
  get running(): boolean {
    return this.inFlight !== undefined || this.queue.length > 0 || (this.body.kind === 'agent' ? this.body.agent.status === 'running' : this.body.driver.busy)
  }

  /** Queue `message` as a turn of its own, after every message accepted before it. */
  deliver(message: UserMessage): void {
    // Named by its place in the child's log: unique there, and the same in every replay.
    const id = `in-${this.session.length}`
    this.session.append({ type: 'input/queued', id, as: 'message', message })
    this.queue.push({ id, message })
    this.pump()
  }

  /** Stop the running turn (it ends `aborted` and its parent is told); queued follow-ups still run. */
  interrupt(reason: unknown): void {
    this.cancelBody(reason)
  }

  /**
   * Stop the child for its owner: drop the follow-ups that have not started, stop the
   * running turn without a notice, and resolve once nothing of it runs. The child stays
   * resumable; a message accepted after this resolves runs normally.
   */
  async stop(reason: unknown): Promise<void> {
    const dropped = this.queue.splice(0)
    if (dropped.length > 0) {
      this.session.append({ type: 'input/taken', ids: dropped.map((entry) => entry.id), dropped: errorMessage(reason) })
      this.events.log('info', `${dropped.length} queued message(s) to subagent ${this.childId} were dropped: ${errorMessage(reason)}`)
    }
    if (!this.running) return
    this.silenced = true
    try {
      this.cancelBody(reason)
      await Promise.all([this.inFlight, this.body.kind === 'agent' ? this.body.agent.whenIdle() : this.body.driver.whenIdle()])
    } finally {
      this.silenced = false
      this.events.changed()
      this.pump()
    }
  }

  /**
   * Dispose the body (a remote child's record is released by the manager). Queued
   * follow-ups do not run now; they stay accepted in the child's session, for when it is
   * brought back.
   */
  async dispose(): Promise<void> {
    this.disposed = true
    this.queue.splice(0)
    try {
      if (this.body.kind === 'agent') await this.body.agent.dispose()
      else await this.body.driver.dispose()
    } finally {
      this.stopWatching()
    }
  }

  private cancelBody(reason: unknown): void {
    if (this.body.kind === 'agent') this.body.agent.cancel(reason)
    else this.body.driver.cancel(reason)
  }

  private pump(): void {
    if (this.inFlight || this.silenced || this.disposed) return
    const next = this.queue.shift()
    if (!next) return
    this.session.append({ type: 'input/taken', ids: [next.id] })
    const turn: Promise<unknown> = this.body.kind === 'agent' ? this.body.agent.followup(next.message) : this.body.driver.runTurn(next.message)
    this.inFlight = turn.then(
      () => {},
      (error: unknown) => {
        // Disposed before the turn ran: nothing settles, nobody is told.
        this.events.log('debug', `a follow-up of subagent ${this.childId} never ran: ${errorMessage(error)}`)
      },
    ).finally(() => {
      this.inFlight = undefined
      this.events.changed()
      this.pump()
    })
  }

  private watchTurns(): () => void {
    let turnStart = 0
    return this.session.subscribe((update) => {
      if (update.type === 'turn/start') {
        turnStart = update.seq
        this.events.turnStarted(this)
      } else if (update.type === 'turn/end') {
        const answers: AssistantMessage[] = []
        for (const event of this.session.events(turnStart)) {
          if (event.seq > update.seq) break
          if (event.type === 'assistant/message') answers.push(event.message)
        }
        const settlement: TurnSettlement = { stopReason: update.reason, closing: selectOutput(answers), quiet: this.silenced }
        if (update.error !== undefined) settlement.error = update.error
        this.events.turnEnded(this, settlement)
      }
    })
  }
}
