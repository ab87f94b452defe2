/** Which rule a session is bound to, and how many of its replies the session has used. */
export interface SessionBinding {
  /** The script the rule belongs to; a session that switches scripts is bound afresh. */
  scriptKey: string
  ruleIndex: number
  cursor: number
}

interface Entry {
  binding: SessionBinding
  /** A use counter: higher was used more recently. */
  lastUsed: number
}

/**
 * One small entry per session that has made a request. Past `maxSessions` the least
 * recently used tenth is dropped at once, so a long-running process does not grow without
 * bound; a dropped session that returns is bound again from its first reply. Using an
 * entry only bumps a counter: re-inserting into the Map on every request (to keep it in
 * LRU order) made large maps rehash all the time.
 */
export class SessionBindings {
  private entries = new Map<string, Entry>()
  private clock = 0

  constructor(private maxSessions: number) {}

  get size(): number {
    return this.entries.size
  }

  /** The session's binding, marked as just used. */
  touch(sessionId: string): SessionBinding | undefined {
    const entry = this.entries.get(sessionId)
    if (!entry) return undefined
    entry.lastUsed = ++this.clock
    return entry.binding
  }

  bind(sessionId: string, binding: SessionBinding): void {
    this.entries.set(sessionId, { binding, lastUsed: ++this.clock })
    if (this.entries.size > this.maxSessions) this.evictStalest()
  }

  forget(sessionId: string): boolean {
    return this.entries.delete(sessionId)
  }

  private evictStalest(): void {
    // Drop a tenth at a time (at least one), so the sort runs once per many bindings.
    const keep = this.maxSessions + 1 - Math.max(1, Math.floor(this.maxSessions / 10))
    const byAge = [...this.entries].sort(([, a], [, b]) => a.lastUsed - b.lastUsed)
    for (const [sessionId] of byAge.slice(0, this.entries.size - keep)) this.entries.delete(sessionId)
  }
}
