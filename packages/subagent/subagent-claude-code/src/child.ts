/**
 * The process of one query of the Agent SDK: the provider's transport, which the
 * connection file (`session.ts`) makes and the turn file (`turn.ts`) starts and reads.
 * Claude Code keeps a conversation in its own transcript, not in a process, so a child is
 * made at once, started by its turn and done when its turn is.
 */
import { createRequire } from 'node:module'
import type { Options, Query } from '@anthropic-ai/claude-agent-sdk'
import type { RemoteChild, RemoteProcess } from '@dsh/subagent'
import { describeExit as describeTreeExit } from '@dsh/process'
import { ClaudeProcess } from './claude-process.js'
import type { ClaudeCodeRunSpec } from './run-spec.js'

type AgentSdk = typeof import('@anthropic-ai/claude-agent-sdk')
let agentSdk: AgentSdk | undefined

/**
 * The Agent SDK, loaded at the first run: it is an optional peer, so this package loads
 * without it and the plugin says at start-up what to install (`missingClaudeCodePackage`).
 */
function query(params: Parameters<AgentSdk['query']>[0]): Query {
  agentSdk ??= createRequire(import.meta.url)('@anthropic-ai/claude-agent-sdk') as AgentSdk
  return agentSdk.query(params)
}

/**
 * A continuable child's session: its id, chosen here (a UUID) and given to the first turn
 * as `sessionId`, and whether Claude Code has created it (every later turn passes it as
 * `resume`). A first turn that fails before Claude Code created the session leaves the
 * next turn to create it.
 */
export interface ClaudeSession {
  readonly id: string
  created: boolean
}

/** The process of one query. */
export class ClaudeChild implements RemoteChild {
  readonly claude = new ClaudeProcess()
  readonly process: RemoteProcess
  /** Claude Code's session id, from its `system/init` message. */
  remoteId: string | undefined
  private readonly abort = new AbortController()
  private query: Query | undefined
  /** Its one query has started: the next turn needs another child. */
  private used = false

  constructor(readonly spec: ClaudeCodeRunSpec) {
    const { claude } = this
    this.process = {
      // Once the query has ended its process is no one's to signal.
      get pid() {
        return claude.exit ? undefined : claude.pid
      },
      exited: () => claude.exited(),
      stderr: () => claude.stderrTail(),
      howItEnded: () => {
        const exit = claude.exit
        if (!exit) return 'stopped answering'
        return exit.spawnError ? `could not be started: ${exit.spawnError.message}` : describeTreeExit(exit)
      },
    }
  }

  /** The query of this child's one turn; `onSpawn` hears when the SDK spawns its process. */
  start(prompt: string, options: Options, onSpawn: () => void): Query {
    // One query per child: the next turn starts a new process.
    this.used = true
    this.query = query({
      prompt,
      options: {
        ...options,
        abortController: this.abort,
        spawnClaudeCodeProcess: (spawnOptions) => {
          const child = this.claude.spawn(spawnOptions)
          onSpawn()
          return child
        },
      },
    })
    return this.query
  }

  /** Whether it can take a turn: it has not run its query (nor been closed). */
  async running(): Promise<boolean> {
    return !this.used
  }

  /** Close the query and reap the process tree. Idempotent. */
  async close(): Promise<void> {
    this.used = true
    this.abort.abort()
    try {
      this.query?.close()
    } catch {
      // close() on an already-ended query has nothing left to close.
    }
    await this.claude.dispose(this.spec.graceMs)
  }
}
