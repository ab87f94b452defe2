/**
 * A session's lineage key: the name of its recording, the same in every run of the same
 * program. A root is `root` (or the base a host gives, e.g. an ACP child's lineage from
 * its parent process); a child is its parent's key, a dot, and the id of the parent's
 * tool call that started it (from its session header). Tool call ids come from the model,
 * so under replay they are the recorded ones: concurrent siblings get their keys from
 * what started them, never from which of them called the model first.
 */
import type { SessionHeader } from '@dsh/session'
import { lineageSegment } from './format.js'

export interface SessionFacts {
  header: SessionHeader
  /** The session's own first prompt (after any fork seed). */
  ownPrompt: string
}

export class Lineage {
  private keys = new Map<string, string>()
  private roots = 0
  /** Children started without a tool call (not by the subagent tools), numbered per parent. */
  private untracedChildren = new Map<string, number>()

  constructor(
    private readonly facts: (sessionId: string) => SessionFacts | undefined,
    private readonly rootKey: string,
    /** A key given from outside (an ACP session whose parent runs in another process). */
    private readonly assignedKey: (sessionId: string) => string | undefined = () => undefined,
  ) {}

  keyOf(sessionId: string): string {
    const known = this.keys.get(sessionId)
    if (known !== undefined) return known
    const header = this.facts(sessionId)?.header
    const assigned = this.assignedKey(sessionId)
    let key: string
    if (assigned !== undefined) key = assigned
    else if (header?.parentSession === undefined || this.facts(header.parentSession) === undefined) {
      // Several roots in one process (an ACP server's sessions) are numbered in the order
      // they first call the model; one root, the usual case, is just the base key.
      this.roots++
      key = this.roots === 1 ? this.rootKey : `${this.rootKey}-${this.roots}`
    } else {
      const parentKey = this.keyOf(header.parentSession)
      if (header.toolCallId !== undefined) key = `${parentKey}.${lineageSegment(header.toolCallId)}`
      else {
        const ordinal = (this.untracedChildren.get(parentKey) ?? 0) + 1
        this.untracedChildren.set(parentKey, ordinal)
        key = `${parentKey}.child-${ordinal}`
      }
    }
    this.keys.set(sessionId, key)
    return key
  }
}
