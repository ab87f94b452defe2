/**
 * The one notice path: what an owner is told about its work, by every kind of owned work
 * (a background task that settled, a continuable child's turn that settled, a child's
 * report), reaching the owner exactly once, through one input source per owner and with
 * one bound on the turns notices may start.
 *
 * A notice is noted, then the owner is asked to wake (a no-op while it runs); the agent
 * polls its sources at every step boundary and whenever a turn could start, and the
 * notice is taken at that poll. A task's notice is rendered only then, after a last check
 * against the registry, so a read, wait or kill that comes first suppresses it.
 *
 * Waking is bounded: after `maxWakes` notice-started turns in a row (no other input in
 * between), a poll for a new turn gives nothing; the notices wait for the owner's next
 * turn, so a model that answers every notice by starting more work cannot spin forever.
 *
 * A durable notice (a child's settlement, a report) is recorded in the owner's session
 * when it is accepted (`input/queued`) and when it is taken (`input/taken`): one accepted
 * before the process died waits for the owner again when its session is resumed.
 */
import type { Logger } from 'cordis'
import type { Agent, AgentRegistry, InputBoundary } from '@dsh/agent'
import { userText, type UserMessage } from '@dsh/llm'
import type { TaskInfo } from './types.js'

/** How a surface words the notice of tasks that settled together (`@dsh/tool-tasks` gives it). */
export type TaskNoticeRenderer = (tasks: readonly TaskInfo[]) => string

/** What the desk needs of the task registry. */
export interface NoticeTasks {
  /** If the task settled and nobody has seen it, mark it reported and return it. */
  takeUnreported(id: string): TaskInfo | undefined
}

/** A notice accepted for an owner and not taken yet. */
interface Held {
  message: UserMessage
  /** Its id in the owner's session, when it is durable. */
  id?: string
}

interface OwnerState {
  /** Settled task ids waiting for delivery; each is re-checked against the registry when delivered. */
  tasks: string[]
  /** Notices with a message of their own (a child's settlement, a report). */
  held: Held[]
  /** Turns started by notices since the owner last got any other input. */
  wakes: number
  /** The notice messages sent to this owner, to tell them from other input in its log. */
  sent: WeakSet<UserMessage>
  /** Removes the input source and the log observer. */
  detach: () => void
  warned: boolean
}

export class NoticeDesk {
  private owners = new Map<string, OwnerState>()
  private render: TaskNoticeRenderer | undefined

  constructor(
    private readonly tasks: NoticeTasks,
    private readonly agents: () => AgentRegistry,
    private readonly maxWakes: number,
    private readonly log: () => Logger,
  ) {}

  /** The surface that words task notices came or went; owners with task notices waiting are woken. */
  renderTasksWith(render: TaskNoticeRenderer | undefined): void {
    this.render = render
    if (render === undefined) return
    for (const [id, state] of this.owners) if (state.tasks.length > 0) this.agents().get(id)?.wake()
  }

  /** A task settled (the registry announces each settlement here). */
  taskSettled(task: TaskInfo): void {
    if (task.owner === undefined || task.reported) return
    const agent = this.agents().get(task.owner)
    if (!agent || !deliverable(agent)) return
    this.stateFor(agent).tasks.push(task.id)
    agent.wake()
  }

  /**
   * A notice for `owner` with its own message, which wakes it (bounded). Returns `false`,
   * keeping nothing, when the owner is disposing or gone. A durable one is recorded in the
   * owner's session until it is taken.
   */
  post(owner: Agent, message: UserMessage, options: { durable?: boolean } = {}): boolean {
    if (!deliverable(owner)) return false
    const held: Held = { message }
    if (options.durable) {
      // Named by its place in the owner's log: unique there, and the same in every replay.
      held.id = `in-${owner.session.length}`
      owner.session.append({ type: 'input/queued', id: held.id, as: 'notice', message })
    }
    this.stateFor(owner).held.push(held)
    owner.wake()
    return true
  }

  /**
   * `owner` was resumed from its session: the durable notices it had not taken when its
   * last process ended wait for it again. It is not woken: they join its next step.
   */
  resumed(owner: Agent): void {
    const pending = new Map<string, UserMessage>()
    for (const event of owner.session.ownEvents()) {
      if (event.type === 'input/queued' && event.as === 'notice') pending.set(event.id, event.message)
      else if (event.type === 'input/taken') for (const id of event.ids) pending.delete(id)
    }
    if (pending.size === 0 || !deliverable(owner)) return
    const state = this.stateFor(owner)
    for (const [id, message] of pending) state.held.push({ id, message })
  }

  /** Give `owner` its input source now (before any notice: a parent of a continuable child). */
  attach(owner: Agent): void {
    if (deliverable(owner)) this.stateFor(owner)
  }

  /** Drop what is held for an owner being disposed (its durable notices stay in its session). */
  forget(owner: string): void {
    const state = this.owners.get(owner)
    if (!state) return
    this.owners.delete(owner)
    state.detach()
    const waiting = state.held.length
    if (waiting > 0) this.log().info('%d notice(s) for %s were not delivered: it is disposed', waiting, owner)
  }

  /** The owners the desk holds anything for (an input source, waiting notices): for diagnostics. */
  held(): string[] {
    return [...this.owners.keys()]
  }

  close(): void {
    for (const owner of [...this.owners.keys()]) this.forget(owner)
  }

  private stateFor(agent: Agent): OwnerState {
    let state = this.owners.get(agent.id)
    if (!state) {
      const created: OwnerState = { tasks: [], held: [], wakes: 0, sent: new WeakSet(), detach: () => {}, warned: false }
      const removeSource = agent.addInputSource((boundary) => this.take(agent, created, boundary))
      const stopObserving = agent.session.subscribe((update) => {
        // Other input (a person, a parent) ends a run of notice-started turns.
        if (update.type === 'user/message' && !created.sent.has(update.message)) {
          created.wakes = 0
          created.warned = false
        }
      })
      created.detach = () => {
        removeSource()
        stopObserving()
      }
      this.owners.set(agent.id, (state = created))
    }
    return state
  }

  /** The owner's input source: every notice still news, tasks that settled together in one message. */
  private take(agent: Agent, state: OwnerState, boundary: InputBoundary): UserMessage[] {
    const taskWaiting = state.tasks.length > 0 && this.render !== undefined
    if (!taskWaiting && state.held.length === 0) return []
    if (boundary === 'wake' && state.wakes >= this.maxWakes) {
      if (!state.warned) {
        state.warned = true
        this.log().warn('agent %s was woken by %d notices in a row; further notices wait for its next turn', agent.id, state.wakes)
      }
      return []
    }
    const messages: UserMessage[] = []
    if (taskWaiting) {
      const settled = state.tasks.splice(0).flatMap((id) => this.tasks.takeUnreported(id) ?? [])
      if (settled.length > 0) messages.push(userText(this.render!(settled)))
    }
    const held = state.held.splice(0)
    const ids = held.flatMap((entry) => (entry.id === undefined ? [] : [entry.id]))
    // Taken now: the loop logs them as this step's input right after this poll.
    if (ids.length > 0) agent.session.append({ type: 'input/taken', ids })
    for (const entry of held) messages.push(entry.message)
    if (messages.length === 0) return []
    for (const message of messages) state.sent.add(message)
    if (boundary === 'wake') state.wakes++
    return messages
  }
}

function deliverable(agent: Agent): boolean {
  return agent.status === 'idle' || agent.status === 'running'
}
