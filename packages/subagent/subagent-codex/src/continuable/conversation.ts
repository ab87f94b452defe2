/**
 * A continuable Codex child: one non-ephemeral thread. While its app-server lives, each
 * message is a new `turn/start` on the thread; when the process is gone (a crash, a turn
 * that timed out or ignored `turn/interrupt`, or a new dsh process resuming a record), the
 * next message starts the app-server again and reopens the thread with `thread/resume`,
 * so Codex continues with its whole history from `CODEX_HOME/sessions`.
 *
 * A turn never rejects for the child's sake: a crash, garbage, a timeout or a failed
 * restart resolves `error` with a one-line diagnostic; a cancelled turn resolves `aborted`.
 */
import { assertNever, errorMessage, type StopReason } from '@dsh/base'
import type { AssistantMessage, TextBlock } from '@dsh/llm'
import { EXIT_DRAIN_MS, selectOutput, SubagentError, type RemoteConversation, type SubagentResult } from '@dsh/subagent'
import { describeExit } from '@dsh/process'
import { readTurnId, type AppServerEvent } from '../app-server-events.js'
import type { CodexRunSpec } from '../config.js'
import { RpcError } from '../connection.js'
import { CODEX_CHILD_NAME } from '../codex-run.js'
import { CodexChild } from './codex-child.js'

interface RunningTurn {
  cancel(reason?: unknown): void
  readonly done: Promise<SubagentResult>
}

export class CodexConversation implements RemoteConversation {
  private turn: RunningTurn | undefined
  private disposal: Promise<void> | undefined

  constructor(
    /** The spec of the child's turns (cwd, environment, permissions, model, limits). */
    private readonly spec: CodexRunSpec,
    readonly remoteId: string,
    private child: CodexChild | undefined,
  ) {}

  /** Provider-owned: where the thread runs, and the model it was asked for. */
  get resumeData(): Readonly<Record<string, unknown>> {
    return { cwd: this.spec.cwd, ...(this.spec.model !== undefined && { model: this.spec.model }) }
  }

  get pid(): number | undefined {
    return this.child?.tree.pid
  }

  send(message: TextBlock[]): Promise<SubagentResult> {
    if (this.disposal) return Promise.resolve(result([], '', [], 'error', `the conversation with Codex thread ${this.remoteId} was closed; it takes no more messages`))
    if (this.turn) return Promise.reject(new SubagentError('INVALID_REQUEST', `a turn of Codex thread ${this.remoteId} is still running; send the next message after it settles`))
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

  /** Start the app-server and reopen the thread now (a resume), rather than at the next message. */
  async reconnect(signal: AbortSignal): Promise<void> {
    this.child = await CodexChild.launch(this.spec, { kind: 'resume', threadId: this.remoteId }, signal)
  }

  private runTurn(message: TextBlock[]): RunningTurn {
    const { spec } = this
    const startup = new AbortController()
    const messages: string[] = []
    const notes: string[] = []
    let streamed = ''
    let lastError: string | undefined
    let turnId: string | undefined
    let settled = false
    let cancelled = false
    let current: CodexChild | undefined
    const timers = new Set<NodeJS.Timeout>()
    let resolveDone!: (value: SubagentResult) => void
    const done = new Promise<SubagentResult>((resolve) => (resolveDone = resolve))
    const settle = (stopReason: StopReason, diagnostic?: string) => {
      if (settled) return
      settled = true
      for (const timer of timers) clearTimeout(timer)
      if (current && current.listener === listener) current.listener = undefined
      resolveDone(result(messages, streamed, notes, stopReason, diagnostic))
    }
    const later = (ms: number, action: () => void) => {
      const timer = setTimeout(() => {
        timers.delete(timer)
        action()
      }, ms)
      timers.add(timer)
    }
    /** The process cannot be trusted with the next turn: stop it; the next message starts it again. */
    const abandon = (child: CodexChild) => {
      if (this.child === child) this.child = undefined
      child.close().catch(() => {
        // It outlived SIGKILL; nothing later can reach it either.
      })
    }
    const interrupt = (child: CodexChild) => {
      if (turnId === undefined) return
      child.connection.request('turn/interrupt', { threadId: this.remoteId, turnId }).catch(() => {
        // Refused or unanswered: the grace period ends the turn either way.
      })
    }
    const listener = {
      event: (event: AppServerEvent) => {
        if (settled || (turnId !== undefined && event.turnId !== turnId)) return
        switch (event.type) {
          case 'agent-message-delta':
            streamed += event.delta
            return
          case 'agent-message':
            messages.push(event.text)
            return
          case 'error':
            if (!event.willRetry) lastError = event.info ? `${event.info}: ${event.message}` : event.message
            return
          case 'turn-completed':
            return completed(event)
          default:
            return assertNever(event, 'app-server event')
        }
      },
      note: (note: string) => void notes.push(note),
      protocolError: (error: Error) => {
        settle('error', `protocol during turn: ${error.message}`)
        if (current) abandon(current)
      },
    }
    const completed = (event: Extract<AppServerEvent, { type: 'turn-completed' }>) => {
      switch (event.status) {
        case 'completed':
          return settle('completed')
        case 'interrupted':
          return settle('aborted', cancelled ? 'the turn was cancelled' : 'codex interrupted the turn on its own')
        case 'failed':
          return settle('error', `model-error during turn: ${event.error ? (event.error.info ? `${event.error.info}: ${event.error.message}` : event.error.message) : (lastError ?? 'codex reported the turn failed without an error')}`)
        case 'inProgress':
          return settle('error', 'protocol during turn: codex sent turn/completed for a turn still in progress')
        default:
          return assertNever(event.status, 'turn status')
      }
    }
    const cancel = (reason?: unknown) => {
      if (settled || cancelled) return
      cancelled = true
      startup.abort(reason)
      const child = current
      if (!child) return
      interrupt(child)
      later(spec.graceMs, () => {
        settle('aborted', `the turn was cancelled: ${CODEX_CHILD_NAME} did not confirm turn/interrupt within graceMs (${spec.graceMs} ms); it was stopped, and the next message starts it again`)
        abandon(child)
      })
    }

    void (async () => {
      let child = this.child
      if (!child || !(await child.running())) {
        if (child) abandon(child)
        try {
          child = await CodexChild.launch(spec, { kind: 'resume', threadId: this.remoteId }, startup.signal)
        } catch (error) {
          if (cancelled) return settle('aborted', 'the turn was cancelled while the codex app-server was starting again')
          return settle('error', `the codex app-server could not be started again to continue thread ${this.remoteId}: ${errorMessage(error)}`)
        }
        if (this.disposal || cancelled) {
          await child.close().catch(() => {
            // Reaping failed; nothing more can be done for a process we never used.
          })
          return settle('aborted', 'the turn was cancelled while the codex app-server was starting again')
        }
        this.child = child
      }
      current = child
      child.listener = listener
      if (spec.timeoutMs !== undefined) {
        const limit = spec.timeoutMs
        later(limit, () => {
          interrupt(child)
          settle('error', `timeout during turn: it did not finish within timeoutMs (${limit} ms); the app-server was stopped, and the next message starts it again`)
          abandon(child)
        })
      }
      void child.tree.exited.then(async () => {
        await new Promise((resolve) => setTimeout(resolve, EXIT_DRAIN_MS))
        if (settled) return
        const exit = child.tree.exit
        if (cancelled) settle('aborted', 'the turn was cancelled')
        else settle('error', child.withStderr(`crash during turn: ${CODEX_CHILD_NAME} ${exit ? describeExit(exit) : 'stopped answering'}; the next message starts it again`))
        abandon(child)
      })
      try {
        const started = await child.connection.request('turn/start', { threadId: this.remoteId, input: message.map((block) => ({ type: 'text' as const, text: block.text, text_elements: [] })) })
        turnId = readTurnId(started)
        if (cancelled) interrupt(child)
      } catch (error) {
        if (settled) return
        if (cancelled) return settle('aborted', 'the turn was cancelled')
        if (error instanceof RpcError) return settle('error', `turn/start refused: ${error.message}`)
        // The connection closed: the exit watch reports the process's end.
        if (!(await child.tree.exitWithin(EXIT_DRAIN_MS))) {
          settle('error', child.withStderr(`turn/start failed: ${errorMessage(error)}`))
          abandon(child)
        }
      }
    })()
    return { cancel, done }
  }
}

function result(messages: string[], streamed: string, notes: string[], stopReason: StopReason, diagnostic: string | undefined): SubagentResult {
  const output = selectOutput(
    messages.map((text): AssistantMessage => ({ role: 'assistant', content: [{ type: 'text', text }] })),
    streamed,
  )
  const lines = [diagnostic, ...notes].filter((line): line is string => !!line)
  const value: SubagentResult = { output, stopReason }
  if (lines.length > 0) value.diagnostic = lines.join('; ').replace(/\s+/g, ' ')
  return value
}
