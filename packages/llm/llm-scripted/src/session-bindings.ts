/** Which rule a session is bound to, and how many of its replies the session has used. */
export interface SessionBinding {
  /** The script the rule belongs to; a session that switches scripts is bound afresh. */
  scriptKey: string
  ruleIndex: number
  cursor: number
}

/**
 * One small entry per session that has made a request, least recently used first. Past
 * `maxSessions` the stalest entries are dropped, so a long-running process does not grow
 * without bound; a dropped session that returns is bound again from its first reply.
 */
export class SessionBindings {
  private bindings = new Map<string, SessionBinding>()

  constructor(private maxSessions: number) {}

  get size(): number {
    return this.bindings.size
  }

  /** The session's binding, marked as just used. */
  touch(sessionId: string): SessionBinding | undefined {
    const binding = this.bindings.get(sessionId)
    if (binding) {
      // Re-inserting moves the entry to the end of the Map's order, which is the LRU order.
      this.bindings.delete(sessionId)
      this.bindings.set(sessionId, binding)
    }
    return binding
  }

  bind(sessionId: string, binding: SessionBinding): void {
    this.bindings.delete(sessionId)
    this.bindings.set(sessionId, binding)
    for (const stalest of this.bindings.keys()) {
      if (this.bindings.size <= this.maxSessions) break
      this.bindings.delete(stalest)
    }
  }

  forget(sessionId: string): boolean {
    return this.bindings.delete(sessionId)
  }
}
