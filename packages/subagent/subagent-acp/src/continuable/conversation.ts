/**
 * A continuable ACP child: one ACP session that stays open while its agent process lives;
 * each message is a new `session/prompt` on it. When the process is gone (it crashed, a
 * turn timed out or ignored `session/cancel`, or this is a new dsh process resuming a
 * record), the next message starts the agent again and reopens the session with
 * `session/load`, so the agent continues with its whole history.
 *
 * A turn never rejects for the child's sake: a crash, garbage, a timeout or a failed
 * restart resolves `error` with a diagnostic; a cancelled turn resolves `aborted`.
 */
import { errorMessage, stopReasonOfAcp, type StopReason } from '@dsh/base'
import { RequestError, type LoadSessionRequest, type SessionUpdate } from '@agentclientprotocol/sdk'
import { describeExit } from '@dsh/process'
import type { TextBlock } from '@dsh/llm'
import { EXIT_DRAIN_MS, selectOutput, SubagentError, type RemoteConversation, type SubagentResult } from '@dsh/subagent'
import type { AcpRunSpec } from '../config.js'
import { describeRpcError } from '../rpc-error.js'
import { refuseOversizedPrompt } from '../frame-limit.js'
import { AcpChild } from './acp-child.js'

/** What a conversation needs to reopen its session in a fresh process. */
export interface AcpReopen {
  cwd: string
  /** The parent's session id, sent as `_meta.dsh.parentSession` so a dsh child checks it is reopened by its own parent. */
  parentSession: string
  /** The child's depth. */
  depth: number
}

interface RunningTurn {
  cancel(reason?: unknown): void
  readonly done: Promise<SubagentResult>
}

export class AcpConversation implements RemoteConversation {
  private child: AcpChild | undefined
  private turn: RunningTurn | undefined
  private disposal: Promise<void> | undefined

  constructor(
    private readonly spec: AcpRunSpec,
    readonly remoteId: string,
    private readonly reopen: AcpReopen,
    child: AcpChild | undefined,
  ) {
    this.child = child
  }

  /** Provider-owned: where the session lives, so a later process can reopen it. */
  get resumeData(): Readonly<Record<string, unknown>> {
    return { cwd: this.reopen.cwd }
  }

  get pid(): number | undefined {
    return this.child?.tree.pid
  }

  send(message: TextBlock[]): Promise<SubagentResult> {
    if (this.disposal) return Promise.resolve(this.result('', 'error', `the conversation with ACP session ${this.remoteId} was closed; it takes no more messages`))
    if (this.turn) return Promise.reject(new SubagentError('INVALID_REQUEST', `a turn of ACP session ${this.remoteId} is still running; send the next message after it settles`))
    const turn = this.runTurn(message)
    this.turn = turn
    void turn.done.then(() => {
      if (this.turn === turn) this.turn = undefined
    })
    return turn.done
  }

  cancel(reason?: unknown): void {
    this.turn?.cancel(reason)
  }

  dispose(): Promise<void> {
    this.disposal ??= (async () => {
      const turn = this.turn
      turn?.cancel('the conversation was closed')
      await turn?.done
      const child = this.child
      this.child = undefined
      await child?.close()
    })()
    return this.disposal
  }

  private runTurn(message: TextBlock[]): RunningTurn {
    const { spec } = this
    const startup = new AbortController()
    let streamed = ''
    let settled = false
    let cancelled = false
    let current: AcpChild | undefined
    const timers = new Set<NodeJS.Timeout>()
    let resolveDone!: (result: SubagentResult) => void
    const done = new Promise<SubagentResult>((resolve) => (resolveDone = resolve))
    const settle = (stopReason: StopReason, diagnostic?: string) => {
      if (settled) return
      settled = true
      for (const timer of timers) clearTimeout(timer)
      if (current) current.stopping = false
      resolveDone(this.result(streamed, stopReason, diagnostic))
    }
    const later = (ms: number, action: () => void) => {
      const timer = setTimeout(() => {
        timers.delete(timer)
        action()
      }, ms)
      timers.add(timer)
    }
    /** The process cannot be trusted with the next turn: stop it; the next message starts it again. */
    const abandon = (child: AcpChild) => {
      if (this.child === child) this.child = undefined
      child.close().catch(() => {
        // It outlived SIGKILL; dispose() of a later child cannot reach it either. Nothing to retry here.
      })
    }

    const cancel = (reason?: unknown) => {
      if (settled || cancelled) return
      cancelled = true
      startup.abort(reason)
      if (!current) return
      current.stopping = true
      current.cancel(this.remoteId)
      const child = current
      later(spec.cancelGraceMs, () => {
        settle('aborted', `the turn was cancelled: the ACP agent did not confirm session/cancel within cancelGraceMs (${spec.cancelGraceMs} ms); it was stopped, and the next message starts it again`)
        abandon(child)
      })
    }

    void (async () => {
      // A message the agent would refuse is not sent: the turn ends error, the agent untouched.
      try {
        refuseOversizedPrompt(spec.provider, message, spec.maxFrameBytes)
      } catch (error) {
        return settle('error', errorMessage(error))
      }
      let child = this.child
      if (!child || !(await child.running())) {
        if (child) abandon(child)
        try {
          child = await this.restart(startup.signal)
        } catch (error) {
          if (cancelled) return settle('aborted', 'the turn was cancelled while the ACP agent was starting again')
          return settle('error', `the ACP agent could not be started again to continue session ${this.remoteId}: ${error instanceof Error ? error.message : String(error)}`)
        }
        if (this.disposal || cancelled) {
          await child.close().catch(() => {
            // Reaping failed; nothing more can be done for a process we never used.
          })
          return settle('aborted', 'the turn was cancelled while the ACP agent was starting again')
        }
        this.child = child
      }
      current = child
      if (spec.timeoutMs !== undefined) {
        const limit = spec.timeoutMs
        later(limit, () => {
          child.cancel(this.remoteId)
          settle('error', `the ACP agent did not finish within timeoutMs (${limit} ms) (stage session/prompt); it was stopped, and the next message starts it again`)
          abandon(child)
        })
      }
      void child.tree.exited.then(async () => {
        await new Promise((resolve) => setTimeout(resolve, EXIT_DRAIN_MS))
        if (settled) return
        const exit = child.tree.exit
        if (cancelled) settle('aborted', 'the turn was cancelled')
        else settle('error', child.withStderr(`the ACP agent ${exit ? describeExit(exit) : 'stopped answering'} during session/prompt; the next message starts it again`))
        abandon(child)
      })
      try {
        const response = await child.prompt(this.remoteId, message.map((block) => ({ type: 'text' as const, text: block.text })), (update) => {
          if (!settled) streamed += chunkText(update)
        })
        const stopReason = stopReasonOfAcp(response.stopReason)
        if (stopReason === 'completed') settle(stopReason)
        else if (stopReason === 'aborted') settle(stopReason, 'the turn was cancelled')
        else settle(stopReason, `the ACP agent ended its turn with stop reason "${response.stopReason}"`)
      } catch (error) {
        if (settled) return
        if (cancelled) return settle('aborted', 'the turn was cancelled')
        // An error answer is the agent's verdict; anything else is the connection going
        // away, most likely because the process died: the exit watch reports that.
        if (error instanceof RequestError) return settle('error', child.withStderr(`session/prompt failed: ${describeRpcError(error)}`))
        // We cut the connection over an oversized frame: that is the reason, whatever the
        // agent does next (closing its input usually makes it exit at once, and the exit
        // watch must not report that exit as the cause).
        const oversized = child.oversizedFrame
        if (oversized !== undefined) {
          settle('error', oversized)
          abandon(child)
          return
        }
        if (!(await child.tree.exitWithin(EXIT_DRAIN_MS))) {
          settle('error', child.withStderr(`session/prompt failed: ${describeRpcError(error)}`))
          abandon(child)
        }
      }
    })()
    return { cancel, done }
  }

  /** Start the agent and reopen the session now (a resume), rather than at the next message. */
  async reconnect(signal: AbortSignal): Promise<void> {
    this.child = await this.restart(signal)
  }

  /** A fresh process with the session reopened through `session/load`. */
  private async restart(signal: AbortSignal): Promise<AcpChild> {
    const { cwd, parentSession, depth } = this.reopen
    const request: LoadSessionRequest = { sessionId: this.remoteId, cwd, mcpServers: [], _meta: { dsh: { parentSession, delegationDepth: depth, provider: this.spec.provider } } }
    const { child } = await AcpChild.launch(this.spec, cwd, signal, (opening) => opening.loadSession(request))
    return child
  }

  private result(streamed: string, stopReason: StopReason, diagnostic: string | undefined): SubagentResult {
    const result: SubagentResult = { output: selectOutput([], streamed), stopReason }
    if (diagnostic !== undefined) result.diagnostic = diagnostic
    return result
  }
}

function chunkText(update: SessionUpdate): string {
  return update.sessionUpdate === 'agent_message_chunk' && update.content.type === 'text' ? update.content.text : ''
}
