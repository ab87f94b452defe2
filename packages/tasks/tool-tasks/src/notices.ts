import type { Logger } from 'cordis'
import type { Agent, AgentRegistry, InputBoundary } from '@dsh/agent'
import { userText, type UserMessage } from '@dsh/llm'
import type { TaskInfo, TaskService } from '@dsh/tasks'
import { renderNotice } from './render.js'

interface OwnerState {
  /** Settled task ids waiting for delivery; each is re-checked against the registry when delivered. */
  pending: string[]
  /** Turns started by notices since the owner last got any other input. */
  wakes: number
  /** The notice messages sent to this owner, to tell them from other input in its log. */
  notices: WeakSet<UserMessage>
  /** Removes the input source and the log observer. */
  detach: () => void
  warned: boolean
}

/**
 * Completion notices: each settlement nobody has seen reaches its owner exactly once.
 *
 * The desk is one of each owner's input sources (`agent.addInputSource`). A settlement is
 * only noted, then the owner is asked to wake (a no-op while it runs); the agent polls its
 * sources at every step boundary and whenever a turn could start, and the notice is
 * rendered at that poll, after a last check against the registry. A read, wait or kill
 * that comes first therefore suppresses it: a model that reads the task in the same step
 * the task settled never gets a stale notice.
 *
 * Waking is bounded: after `maxWakes` notice-started turns in a row (no other input in
 * between), a poll for a new turn gives nothing; the notice waits for the owner's next
 * turn, so a model that answers every notice by starting more work cannot spin forever.
 */
export class NoticeDesk {
  private owners = new Map<string, OwnerState>()

  constructor(
    private readonly tasks: TaskService,
    private readonly agents: AgentRegistry,
    private readonly maxWakes: number,
    private readonly log: Logger,
  ) {}

  /** A task settled (the registry's `onSettled`, or found unreported when the desk starts). */
  settled(task: TaskInfo): void {
    if (task.owner === undefined || task.reported) return
    const agent = this.agents.get(task.owner)
    if (!agent || !deliverable(agent)) return
    this.stateFor(agent).pending.push(task.id)
    agent.wake()
  }

  /** Drop what we hold for an owner being disposed. */
  forget(owner: string): void {
    const state = this.owners.get(owner)
    if (!state) return
    this.owners.delete(owner)
    state.detach()
  }

  close(): void {
    for (const owner of [...this.owners.keys()]) this.forget(owner)
  }

  private stateFor(agent: Agent): OwnerState {
    let state = this.owners.get(agent.id)
    if (!state) {
      const created: OwnerState = { pending: [], wakes: 0, notices: new WeakSet(), detach: () => {}, warned: false }
      const removeSource = agent.addInputSource((boundary) => this.take(agent, created, boundary))
      const stopObserving = agent.session.subscribe((update) => {
        // Other input (a person, a parent) ends a run of notice-started turns.
        if (update.type === 'user/message' && !created.notices.has(update.message)) {
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

  /** The owner's input source: one notice for every pending settlement still unseen. */
  private take(agent: Agent, state: OwnerState, boundary: InputBoundary): UserMessage[] {
    if (state.pending.length === 0) return []
    if (boundary === 'wake' && state.wakes >= this.maxWakes) {
      if (!state.warned) {
        state.warned = true
        this.log.warn('agent %s was woken by %d task notices in a row; further notices wait for its next turn', agent.id, state.wakes)
      }
      return []
    }
    const settled = state.pending.splice(0).flatMap((id) => this.tasks.takeUnreported(id) ?? [])
    if (settled.length === 0) return []
    const notice = userText(renderNotice(settled))
    state.notices.add(notice)
    if (boundary === 'wake') state.wakes++
    return [notice]
  }
}

function deliverable(agent: Agent): boolean {
  return agent.status === 'idle' || agent.status === 'running'
}
