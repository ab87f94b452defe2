/**
 * What continuable children tell their parents (settlement notices), waiting for the
 * parent's next step or turn. Each parent that has heard of a continuable child gets one
 * agent input source draining its box; both are forgotten when the parent is disposed.
 */
import type { Agent } from '@dsh/agent'
import type { UserMessage } from '@dsh/llm'

export class ParentMailbox {
  private readonly boxes = new Map<string, UserMessage[]>()
  private readonly sources = new Map<string, { agent: Agent; dispose: () => void }>()

  constructor(private readonly log: (message: string) => void) {}

  /** Queue `message` for `parent` and wake it (an idle parent starts a turn; a busy one reads it at its next step). */
  post(parent: Agent, message: UserMessage): void {
    if (isGoing(parent)) {
      this.log(`a subagent notice for ${parent.id} was dropped: the parent is ${parent.status}`)
      return
    }
    const box = this.boxes.get(parent.id) ?? []
    box.push(message)
    this.boxes.set(parent.id, box)
    this.attach(parent)
    parent.wake()
  }

  /** Give `parent` its input source now (a parent of a continuable child reads its box at every step). */
  attach(parent: Agent): void {
    if (this.sources.get(parent.id)?.agent === parent || isGoing(parent)) return
    const dispose = parent.addInputSource(() => {
      const box = this.boxes.get(parent.id)
      if (!box || box.length === 0) return []
      this.boxes.delete(parent.id)
      return box
    })
    this.sources.set(parent.id, { agent: parent, dispose })
  }

  /** The parent is gone: drop its waiting messages and its input source. */
  forget(parentId: string): void {
    const waiting = this.boxes.get(parentId)?.length ?? 0
    if (waiting > 0) this.log(`${waiting} subagent notice(s) for ${parentId} were dropped: the parent is disposed`)
    this.boxes.delete(parentId)
    this.sources.get(parentId)?.dispose()
    this.sources.delete(parentId)
  }

  /** The parents this mailbox holds anything for (a source or waiting messages). */
  held(): string[] {
    return [...new Set([...this.sources.keys(), ...this.boxes.keys()])]
  }
}

function isGoing(agent: Agent): boolean {
  return agent.status === 'disposing' || agent.status === 'disposed'
}
