/**
 * A continuable Claude Code child. Claude Code keeps a conversation in its own transcript
 * (under `CLAUDE_CONFIG_DIR`), not in a process: each message is one `query()` (one
 * process, the one-shot run of `claude-code-run.ts`) that resumes the session by id, so
 * the child continues with its whole history, in this dsh process or a later one.
 *
 * The id is chosen here (a UUID) and given to the first turn as `sessionId`; every later
 * turn passes it as `resume`. A first turn that fails before Claude Code created the
 * session leaves the next turn to create it.
 */
import { randomUUID } from 'node:crypto'
import { errorMessage, type StopReason } from '@dsh/base'
import type { Agent } from '@dsh/agent'
import type { TextBlock } from '@dsh/llm'
import { SubagentError, type ProgressSink, type RemoteConversation, type SubagentRequest, type SubagentResult } from '@dsh/subagent'
import { startClaudeCodeRun, type ClaudeCodeRun } from './claude-code-run.js'
import { resolveRunSpec, type ClaudeCodeSettings } from './run-spec.js'

/** Claude Code session ids are UUIDs (`options.sessionId` must be one). */
const SESSION_ID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i

export function isClaudeSessionId(id: string): boolean {
  return SESSION_ID.test(id)
}

export interface ClaudeCodeConversationInit {
  settings: ClaudeCodeSettings
  /** The parent agent, looked up at each turn: a turn is admitted against it like a one-shot run. */
  parent: () => Agent | undefined
  parentId: string
  /** Absent: a new session with a fresh id. */
  resume?: { sessionId: string }
  label?: string
  /** The model a request asked for (`agentOptions.model`), kept for every turn. */
  model?: string
}

export class ClaudeCodeConversation implements RemoteConversation {
  readonly remoteId: string
  private created: boolean
  private turn: { controller: AbortController; done: Promise<SubagentResult>; run?: ClaudeCodeRun } | undefined
  private disposal: Promise<void> | undefined

  constructor(private readonly init: ClaudeCodeConversationInit) {
    this.remoteId = init.resume?.sessionId ?? randomUUID()
    this.created = init.resume !== undefined
  }

  get resumeData(): Readonly<Record<string, unknown>> {
    return this.init.model === undefined ? {} : { model: this.init.model }
  }

  get pid(): number | undefined {
    return this.turn?.run?.pid
  }

  send(message: TextBlock[], progress?: ProgressSink): Promise<SubagentResult> {
    if (this.disposal) return Promise.resolve(failed('error', `the conversation with Claude Code session ${this.remoteId} was closed; it takes no more messages`))
    if (this.turn) return Promise.reject(new SubagentError('INVALID_REQUEST', `a turn of Claude Code session ${this.remoteId} is still running; send the next message after it settles`))
    const controller = new AbortController()
    const turn: NonNullable<ClaudeCodeConversation['turn']> = { controller, done: Promise.resolve(failed('error', 'not started')) }
    turn.done = this.runTurn(message, turn, progress).finally(() => {
      if (this.turn === turn) this.turn = undefined
    })
    this.turn = turn
    return turn.done
  }

  cancel(reason?: unknown): void {
    this.turn?.controller.abort(reason ?? new Error('the turn was cancelled'))
  }

  dispose(): Promise<void> {
    this.disposal ??= (async () => {
      const turn = this.turn
      turn?.controller.abort(new Error('the conversation was closed'))
      await turn?.done
    })()
    return this.disposal
  }

  /** One query that resumes the session; its run reports to `progress` (the one-shot run's progress is the turn's). */
  private async runTurn(message: TextBlock[], turn: NonNullable<ClaudeCodeConversation['turn']>, progress: ProgressSink | undefined): Promise<SubagentResult> {
    const { settings, label, model } = this.init
    const parent = this.init.parent()
    if (!parent) return failed('error', `the parent agent ${this.init.parentId} of Claude Code session ${this.remoteId} is not live in this process; deliver the message from the parent`)
    const request: SubagentRequest = { prompt: message, parent, signal: turn.controller.signal, ...(label !== undefined && { label }), ...(model !== undefined && { agentOptions: { model } }), ...(progress && { progress }) }
    const spec = { ...resolveRunSpec(settings, request), session: { id: this.remoteId, resume: this.created } }
    let run: ClaudeCodeRun
    try {
      run = await startClaudeCodeRun(spec, request)
    } catch (error) {
      if (turn.controller.signal.aborted) return failed('aborted', 'the turn was cancelled before Claude Code started')
      return failed('error', `Claude Code could not continue session ${this.remoteId}: ${errorMessage(error)}`)
    }
    // Published means Claude Code sent its init message: the session exists from here on.
    this.created = true
    turn.run = run
    const result = await run.result
    try {
      await run.dispose()
    } catch (error) {
      return { ...result, diagnostic: [result.diagnostic, `stopping Claude Code afterwards failed: ${errorMessage(error)}`].filter(Boolean).join('; ') }
    }
    return result
  }
}

function failed(stopReason: StopReason, diagnostic: string): SubagentResult {
  return { output: [], stopReason, diagnostic }
}
