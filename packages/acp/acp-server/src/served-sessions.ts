/**
 * The ACP sessions of one connection, with a bound on what they hold. A live session is
 * a dsh agent: its session file open, its lock taken, its history in memory. Beyond
 * `maxLive` live sessions, the least recently used idle one is **parked**: its agent is
 * disposed (file flushed and closed, lock released) and it is reopened from the session
 * store when its next prompt comes. So descriptors and memory stay flat however many
 * sessions one client opens. A session is idle when no prompt runs in it and none of its
 * work (background tasks, continuable children) is live. Parking needs a session storage
 * to reopen from; without one, sessions stay live until closed.
 */
import type { Context } from 'cordis'
import { errorMessage } from '@dsh/base'
import type { Agent } from '@dsh/agent'
import type { ScopedServers } from '@dsh/mcp'
import type {} from '@dsh/tasks'
import { openStored } from './load.js'

/** Live sessions a connection keeps before it parks idle ones. */
export const DEFAULT_MAX_LIVE_SESSIONS = 16

export interface ServedSession {
  readonly id: string
  /** The live agent; `undefined` while the session is parked. */
  agent: Agent | undefined
  /** Present while a prompt runs (one at a time per session): aborting it cancels the prompt. */
  prompt?: AbortController
  /** Settles when the running prompt has finished. */
  running?: Promise<unknown>
  /** Set while the agent is being disposed to park the session. */
  parking?: Promise<void>
  lastUsed: number
  /** The MCP servers its client sent (`session/new`, `session/load`): running while the session is open, parked or not. */
  mcp?: ScopedServers
}

export class ServedSessions {
  private readonly sessions = new Map<string, ServedSession>()
  private useCounter = 0

  constructor(
    private readonly ctx: Context,
    private readonly maxLive: number,
    private readonly warn: (format: string, ...args: unknown[]) => void,
  ) {}

  get size(): number {
    return this.sessions.size
  }

  has(id: string): boolean {
    return this.sessions.has(id)
  }

  get(id: string): ServedSession | undefined {
    return this.sessions.get(id)
  }

  /** Serve `agent`; `mcp` are the servers its client sent, their tools already registered for it. */
  add(agent: Agent, mcp?: ScopedServers): ServedSession {
    const served: ServedSession = { id: agent.id, agent, lastUsed: ++this.useCounter, ...(mcp && { mcp }) }
    this.sessions.set(agent.id, served)
    this.parkIdle()
    return served
  }

  /** The session's agent, reopened from the store if it was parked. */
  async agentOf(served: ServedSession): Promise<Agent> {
    served.lastUsed = ++this.useCounter
    if (served.parking) await served.parking
    if (served.agent === undefined) {
      served.agent = await openStored(this.ctx, served.id)
      // The parked agent's tools went with it; its servers kept running.
      served.mcp?.register(served.agent.ctx)
    }
    return served.agent
  }

  /**
   * The ACP session whose client answers for `agentId`: its own, or that of the session
   * that delegated to it in this process (children have their parent in their header).
   */
  sessionOf(agentId: string): ServedSession | undefined {
    let id: string | undefined = agentId
    // Bounded: a delegation chain is far shorter, and a cycle must not hang the gate.
    for (let hops = 0; id !== undefined && hops < 256; hops++) {
      const served = this.sessions.get(id)
      if (served) return served
      id = this.ctx.agents.get(id)?.session.header.parentSession
    }
    return undefined
  }

  /** Close one session: cancel its prompt, dispose its agent, forget it. `false` if unknown. */
  async close(id: string): Promise<boolean> {
    const served = this.sessions.get(id)
    if (!served) return false
    this.sessions.delete(id)
    served.prompt?.abort(new Error('the ACP session was closed'))
    await served.running?.catch(() => {
      // The prompt's own failure was answered to the client already.
    })
    try {
      await served.parking
      await served.agent?.dispose()
      served.agent = undefined
    } finally {
      // Its servers stop whatever became of the agent.
      await served.mcp?.stop()
    }
    return true
  }

  /** Take every agent down (the connection ended). */
  async closeAll(): Promise<void> {
    const all = [...this.sessions.values()]
    this.sessions.clear()
    const outcomes = await Promise.allSettled(
      all.map(async (served) => {
        try {
          await served.parking
          await served.agent?.dispose()
        } finally {
          await served.mcp?.stop()
        }
      }),
    )
    for (const outcome of outcomes) {
      if (outcome.status === 'rejected') this.warn('disposing an ACP session failed: %s', errorMessage(outcome.reason))
    }
  }

  /** Park least recently used idle sessions until at most `maxLive` are live. */
  parkIdle(): void {
    if (this.ctx.sessions.storageName === undefined) return
    const live = [...this.sessions.values()].filter((served) => served.agent !== undefined && !served.parking)
    let excess = live.length - this.maxLive
    if (excess <= 0) return
    for (const served of live.sort((a, b) => a.lastUsed - b.lastUsed)) {
      if (excess <= 0) break
      if (!this.isIdle(served)) continue
      excess--
      const agent = served.agent!
      served.parking = agent
        .dispose()
        .catch((error: unknown) => this.warn('parking ACP session %s failed: %s', served.id, errorMessage(error)))
        .finally(() => {
          if (served.agent === agent) served.agent = undefined
          served.parking = undefined
        })
    }
  }

  private isIdle(served: ServedSession): boolean {
    const agent = served.agent
    if (!agent || served.prompt || agent.status !== 'idle') return false
    // The one registry of owned work knows the agent's tasks and continuable children.
    return !this.ctx.get('tasks')?.hasLive(agent.id)
  }
}
