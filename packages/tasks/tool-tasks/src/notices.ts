import type { Logger } from 'cordis'
import type { Agent, AgentRegistry } from '@dsh/agent'
import { userText, type UserMessage } from '@dsh/llm'
import type { SessionUpdate } from '@dsh/session'
import type { TaskInfo, TaskService } from '@dsh/tasks'
import { renderNotice } from './render.js'

interface OwnerState {
  /** Settled task ids waiting for delivery; each is re-checked against the registry when delivered. */
  pending: string[]
  /** Turns started by notices since the owner last got any other input. */
  wakes: number
  /** The notice messages sent to this owner, to tell them from other input in its log. */
  notices: WeakSet<UserMessage>
  unsubscribe: () => void
  warned: boolean
}

/**
 * Completion notices: each settlement nobody has seen reaches its owner exactly once.
 *
 * Delivery is decided as late as possible, so a read, wait or kill that comes first
 * suppresses the notice: an idle owner is woken at once (`steer` starts a turn), but a
 * busy owner gets the notice at its next step boundary, where it is re-checked. At a
 * `step/start` it is injected (the loop claims its inbox right after); at a `turn/end`
 * it is steered, which starts one more turn once this one is over. A model that reads
 * the task in the same step the task settled therefore never gets a stale notice.
 *
 * Waking is bounded: after `maxWakes` notice-started turns in a row (no other input in
 * between), further notices wait for the owner's next turn instead of starting one, so
 * a model that answers every notice by starting more work cannot spin forever.
 */
export class NoticeDesk {
  private owners = new Map<string, OwnerState>()

  constructor(
    private readonly tasks: TaskService,
    private readonly agents: AgentRegistry,
    private readonly maxWakes: number,
    private readonly log: Logger,
  ) {}

  /** A task settled (the registry's `onSettled`). */
  settled(task: TaskInfo): void {
    if (task.owner === undefined || task.reported) return
    const agent = this.agents.get(task.owner)
    if (!agent || !deliverable(agent)) return
    const state = this.stateFor(agent)
    state.pending.push(task.id)
    // A busy owner hears it at its next step boundary (see the class comment); an idle one,
    // or one whose turn has already logged its end, is woken now.
    if (agent.status === 'idle' || turnIsOver(agent)) this.flush(agent, state, 'wake')
  }

  /** Drop what we hold for an owner being disposed. */
  forget(owner: string): void {
    const state = this.owners.get(owner)
    if (!state) return
    this.owners.delete(owner)
    state.unsubscribe()
  }

  close(): void {
    for (const owner of [...this.owners.keys()]) this.forget(owner)
  }

  private stateFor(agent: Agent): OwnerState {
    let state = this.owners.get(agent.id)
    if (!state) {
      const created: OwnerState = { pending: [], wakes: 0, notices: new WeakSet(), unsubscribe: () => {}, warned: false }
      created.unsubscribe = agent.session.subscribe((update) => this.observe(agent, created, update))
      this.owners.set(agent.id, (state = created))
    }
    return state
  }

  private observe(agent: Agent, state: OwnerState, update: SessionUpdate): void {
    switch (update.type) {
      case 'user/message':
        if (!state.notices.has(update.message)) {
          state.wakes = 0
          state.warned = false
        }
        return
      case 'step/start':
        this.flush(agent, state, 'inject')
        return
      case 'turn/end':
        // A cancelled turn means "stop": a waiting notice must not start a new turn behind
        // the user's back. It stays pending for the agent's next turn.
        if (update.reason === 'aborted') return
        this.flush(agent, state, 'wake')
        return
      default:
        return
    }
  }

  private flush(agent: Agent, state: OwnerState, mode: 'inject' | 'wake'): void {
    if (state.pending.length === 0 || !deliverable(agent)) return
    if (mode === 'wake' && state.wakes >= this.maxWakes) {
      if (!state.warned) {
        state.warned = true
        this.log.warn('agent %s was woken by %d task notices in a row; further notices wait for its next turn', agent.id, state.wakes)
      }
      return
    }
    const settled = state.pending.splice(0).flatMap((id) => this.tasks.takeUnreported(id) ?? [])
    if (settled.length === 0) return
    const notice = userText(renderNotice(settled))
    state.notices.add(notice)
    if (mode === 'inject') {
      agent.inject(notice)
      return
    }
    state.wakes++
    agent.steer(notice)
  }
}

function deliverable(agent: Agent): boolean {
  return agent.status === 'idle' || agent.status === 'running'
}

/** The owner is marked running, but its turn has already logged `turn/end`: no step boundary is coming. */
function turnIsOver(agent: Agent): boolean {
  const { session } = agent
  return session.length > 0 && session.at(session.length - 1)?.type === 'turn/end'
}
