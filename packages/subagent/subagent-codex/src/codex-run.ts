/**
 * One delegation to a fresh `codex app-server`, read top to bottom:
 *
 *   spawn → `initialize` → `initialized` → `thread/start` (ephemeral) → `turn/start`
 *   → publication → notifications until `turn/completed` → dispose reaps the tree.
 *
 * Before publication the run owns the process: any failure reaps it and rejects `start`.
 * After it, every outcome (model error, crash, garbage on stdout, cancel, timeout)
 * settles `result` with a stop reason and a one-line diagnostic; it never rejects.
 */
import { createRequire } from 'node:module'
import type { AssistantMessage } from '@dsh/llm'
import { selectOutput, SubagentError, type StopReason, type SubagentRequest, type SubagentResult, type SubagentRun } from '@dsh/subagent'
import { describeExit, ProcessTree, type ExitInfo } from '@dsh/process'
import { answerServerRequest } from './approvals.js'
import { readNotification, readThreadId, readTurnId, type AppServerEvent } from './app-server-events.js'
import type { CodexRunSpec } from './config.js'
import { AppServerConnection, ConnectionClosedError, ProtocolError, RpcError, type IncomingRequest } from './connection.js'

/** Where a run is; startup failures and diagnostics name it. */
export type Stage = 'spawn' | 'initialize' | 'thread/start' | 'turn/start' | 'turn'

/** How much of the server's stderr is kept, and how much of it (on one line) a diagnostic quotes. */
const STDERR_TAIL_CHARS = 4000
const STDERR_QUOTE_CHARS = 600

const CLIENT_VERSION = (createRequire(import.meta.url)('../package.json') as { version: string }).version

export async function startCodexRun(spec: CodexRunSpec, request: SubagentRequest): Promise<SubagentRun> {
  refuseIfAborted(request.signal)
  const run = new CodexRun(spec, request)
  await run.begin()
  return run
}

/** A pre-aborted delegation never spawns anything. */
export function refuseIfAborted(signal: AbortSignal): void {
  if (signal.aborted) throw new SubagentError('ABORTED', 'the delegation was cancelled before the codex app-server was started', { cause: signal.reason })
}

/** Why startup stopped; turned into the `SubagentError` that `start` rejects with. */
class StartupFailure extends Error {
  constructor(readonly aborted: boolean, message: string) {
    super(message)
  }
}

class CodexRun implements SubagentRun {
  readonly local = false
  readonly result: Promise<SubagentResult>
  id = ''

  private readonly tree: ProcessTree
  private readonly connection: AppServerConnection
  private stage: Stage = 'spawn'
  private threadId: string | undefined
  private turnId: string | undefined
  /** Texts of the completed agent messages, in order, and every delta streamed. */
  private readonly messages: string[] = []
  private streamed = ''
  /** Declined approvals and refused requests, for the diagnostic. */
  private readonly notes: string[] = []
  private lastError: string | undefined
  /** Set once we asked the turn to stop, and why: an `interrupted` turn then means this. */
  private stopping: 'cancel' | 'timeout' | undefined
  private settled = false
  private resolveResult!: (result: SubagentResult) => void
  private failStartup: ((failure: StartupFailure) => void) | undefined
  private readonly timers = new Set<NodeJS.Timeout>()
  private disposal: Promise<void> | undefined
  private readonly onAbort = () => this.cancel(this.request.signal.reason)

  constructor(
    private readonly spec: CodexRunSpec,
    private readonly request: SubagentRequest,
  ) {
    this.result = new Promise<SubagentResult>((resolve) => (this.resolveResult = resolve))
    this.tree = new ProcessTree({
      command: spec.command.command,
      args: [...spec.command.args, 'app-server'],
      cwd: spec.cwd,
      env: spec.env,
      stderrTailChars: STDERR_TAIL_CHARS,
    })
    this.connection = new AppServerConnection(this.tree.child.stdout!, this.tree.child.stdin!, {
      notification: (method, params) => this.onNotification(method, params),
      request: (incoming) => this.onServerRequest(incoming),
      protocolError: (error) => this.onProtocolError(error),
    })
    void this.tree.exited.then((exit) => this.onExit(exit))
  }

  /** Startup. Resolves once the turn is accepted; otherwise reaps the process and rejects. */
  /** A startup failure that arrived after startup had already succeeded, replayed once it has. */
  private afterStartup: (() => void) | undefined

  async begin(): Promise<void> {
    const { signal } = this.request
    const stopped = new Promise<never>((_, reject) => (this.failStartup = reject))
    stopped.catch(() => {})
    const race = <T>(step: Promise<T>) => Promise.race([step, stopped])
    const onStartAbort = () => this.failStartup?.(new StartupFailure(true, `the delegation was cancelled while the codex app-server was starting (stage ${this.stage})`))
    signal.addEventListener('abort', onStartAbort, { once: true })
    const timer = setTimeout(
      () => this.failStartup?.(new StartupFailure(false, `the codex app-server did not get through ${this.stage} within startupTimeoutMs (${this.spec.startupTimeoutMs} ms)`)),
      this.spec.startupTimeoutMs,
    )
    try {
      await race(this.tree.spawned)
      this.stage = 'initialize'
      await race(
        this.connection.request('initialize', {
          clientInfo: { name: 'dsh', title: 'dsh subagent-codex', version: CLIENT_VERSION },
          capabilities: { experimentalApi: false, requestAttestation: false },
        }),
      )
      this.connection.notify('initialized')
      this.stage = 'thread/start'
      const thread = await race(
        this.connection.request('thread/start', {
          cwd: this.spec.cwd,
          approvalPolicy: this.spec.approvalPolicy,
          sandbox: this.spec.sandbox,
          ephemeral: true,
          ...(this.spec.model !== undefined && { model: this.spec.model }),
        }),
      )
      this.threadId = readThreadId(thread)
      this.stage = 'turn/start'
      const turn = await race(
        this.connection.request('turn/start', {
          threadId: this.threadId,
          input: this.request.prompt.map((block) => ({ type: 'text' as const, text: block.text, text_elements: [] })),
        }),
      )
      this.turnId = readTurnId(turn)
    } catch (error) {
      const failure = await this.describeStartupFailure(error)
      // Reap before rejecting: after a rejected start nobody else will.
      await this.reapTree().catch((reapError: unknown) => {
        failure.message += `; and reaping it failed: ${messageOf(reapError)}`
      })
      this.connection.close(new ConnectionClosedError('the run failed to start'))
      throw new SubagentError(failure.aborted ? 'ABORTED' : 'START_FAILED', failure.message, { cause: error })
    } finally {
      clearTimeout(timer)
      signal.removeEventListener('abort', onStartAbort)
      this.failStartup = undefined
    }

    this.stage = 'turn'
    this.id = `${this.request.parent.id}/codex-${this.threadId}`
    // A failure reported in the same tick as the last startup reply (garbage after the
    // turn/start answer in one chunk, an exit right after it) lost the startup race; it
    // still has to end the run, or the result would never settle.
    const late = this.afterStartup
    this.afterStartup = undefined
    late?.()
    if (signal.aborted) this.cancel(signal.reason)
    else if (!this.settled) signal.addEventListener('abort', this.onAbort, { once: true })
    if (this.spec.timeoutMs !== undefined) {
      this.later(this.spec.timeoutMs, () => {
        if (this.settled || this.stopping) return
        this.stopping = 'timeout'
        this.interrupt()
      })
    }
  }

  cancel(_reason?: unknown): void {
    if (this.settled || this.stopping || this.stage !== 'turn') return
    this.stopping = 'cancel'
    this.interrupt()
  }

  dispose(): Promise<void> {
    this.disposal ??= (async () => {
      if (this.stage === 'turn') {
        this.cancel(new Error('disposed'))
        // Give the interrupt a moment to land, so the result reports the turn's own end.
        await Promise.race([this.result, this.pause(this.spec.graceMs)])
      }
      try {
        await this.reapTree()
      } finally {
        this.connection.close(new ConnectionClosedError('the run was disposed'))
        if (!this.settled) this.settle('aborted', 'the run was disposed before codex finished the turn')
        this.clearTimers()
      }
    })()
    return this.disposal
  }

  /** Ask codex to stop the turn; if it does not confirm within the grace period, stop waiting and reap. */
  private interrupt(): void {
    const threadId = this.threadId!
    const turnId = this.turnId!
    this.connection.request('turn/interrupt', { threadId, turnId }).catch(() => {
      // Refused or unanswered: the watchdog below ends the run either way.
    })
    this.later(this.spec.graceMs, () => {
      if (this.settled) return
      const detail = `codex did not confirm turn/interrupt within graceMs (${this.spec.graceMs} ms)`
      if (this.stopping === 'timeout') this.settle('error', this.failure('timeout', `the turn ran past timeoutMs (${this.spec.timeoutMs} ms); ${detail}`))
      else this.settle('aborted', detail)
      void this.reapTree().catch(() => {
        // dispose() awaits the same reaping and reports its failure.
      })
    })
  }

  private onNotification(method: string, params: unknown): void {
    let event: AppServerEvent | undefined
    try {
      event = readNotification(method, params)
    } catch (error) {
      if (error instanceof ProtocolError) return this.onProtocolError(error)
      throw error
    }
    if (!event || event.threadId !== this.threadId || (this.turnId !== undefined && event.turnId !== this.turnId)) return
    switch (event.type) {
      case 'agent-message-delta':
        this.streamed += event.delta
        return
      case 'agent-message':
        this.messages.push(event.text)
        return
      case 'error':
        if (!event.willRetry) this.lastError = errorText(event.message, event.info)
        return
      case 'turn-completed':
        return this.onTurnCompleted(event)
      default:
        return assertNever(event)
    }
  }

  private onTurnCompleted(event: Extract<AppServerEvent, { type: 'turn-completed' }>): void {
    switch (event.status) {
      case 'completed':
        return this.settle('completed')
      case 'interrupted':
        if (this.stopping === 'timeout') return this.settle('error', this.failure('timeout', `the turn ran past timeoutMs (${this.spec.timeoutMs} ms) and was interrupted`))
        return this.settle('aborted', this.stopping === 'cancel' ? undefined : 'codex interrupted the turn on its own')
      case 'failed': {
        const cause = event.error ? errorText(event.error.message, event.error.info) : (this.lastError ?? 'codex reported the turn failed without an error')
        return this.settle('error', this.failure('model-error', cause))
      }
      case 'inProgress':
        return this.settle('error', this.failure('protocol', 'codex sent turn/completed for a turn still in progress'))
      default:
        return assertNever(event.status)
    }
  }

  private onServerRequest(incoming: IncomingRequest): void {
    const answer = answerServerRequest(incoming.method, incoming.params, this.spec.permissionMode)
    if (answer.note) this.notes.push(answer.note)
    if (answer.kind === 'result') this.connection.respond(incoming.id, answer.result)
    else this.connection.respondError(incoming.id, answer.code, answer.message)
  }

  private onProtocolError(error: ProtocolError): void {
    if (this.failStartup) {
      this.afterStartup = () => this.onProtocolError(error)
      return this.failStartup(new StartupFailure(false, `the codex app-server broke the protocol during ${this.stage}: ${error.message}`))
    }
    if (this.settled) return
    this.settle('error', this.failure('protocol', error.message))
    // A server that writes garbage cannot be trusted to finish: stop it now.
    void this.reapTree().catch(() => {
      // dispose() awaits the same reaping and reports its failure.
    })
  }

  private onExit(exit: ExitInfo): void {
    if (this.failStartup) {
      this.afterStartup = () => this.onExit(exit)
      const failStartup = this.failStartup
      void this.tree.exitWithin(0).then(() => failStartup(new StartupFailure(false, this.exitMessage(exit))))
      return
    }
    if (this.settled) return
    // We closed stdin (dispose) or asked the turn to stop: the exit is the end we asked for.
    if (this.stopping === 'cancel' || this.disposal) return this.settle('aborted', this.stopping === 'cancel' ? undefined : 'the run was disposed')
    void this.tree.exitWithin(0).then(() => {
      if (this.settled) return
      const crash = this.failure('crash', this.exitMessage(exit))
      this.settle('error', this.stopping === 'timeout' ? `${this.failure('timeout', `the turn ran past timeoutMs (${this.spec.timeoutMs} ms)`)}; ${crash}` : crash)
    })
  }

  private async describeStartupFailure(error: unknown): Promise<StartupFailure> {
    if (error instanceof StartupFailure) return error
    if (error instanceof RpcError) return new StartupFailure(false, `the codex app-server refused ${error.method}: ${error.message}`)
    if (error instanceof ProtocolError) return new StartupFailure(false, `the codex app-server broke the protocol during ${this.stage}: ${error.message}`)
    if (error instanceof ConnectionClosedError) {
      // Its stdout closed: the exit (code, stderr) says more than the closed pipe.
      const exit = await this.tree.exitWithin(1000)
      return new StartupFailure(false, exit ? this.exitMessage(exit) : `${error.message} during ${this.stage}`)
    }
    if (this.stage === 'spawn') return new StartupFailure(false, `the codex app-server could not be started (stage spawn, ${this.spec.command.command}): ${messageOf(error)}`)
    return new StartupFailure(false, `the codex app-server failed during ${this.stage}: ${messageOf(error)}`)
  }

  /**
   * Close stdin (the app-server exits when its input ends) → graceMs → SIGTERM → graceMs
   * → SIGKILL; shared by every path that ends the process.
   */
  private reapTree(): Promise<void> {
    return this.tree.reap({ stdinGraceMs: this.spec.graceMs, termGraceMs: this.spec.graceMs })
  }

  /** "the codex app-server exited with code 1 during initialize; stderr: …" */
  private exitMessage(exit: ExitInfo): string {
    const stderr = quoteStderr(this.tree.stderr())
    return `the codex app-server ${describeExit(exit)} during ${this.stage}${stderr ? `; stderr: ${stderr}` : ''}`
  }

  /** One line: the category, the stage and the cause. */
  private failure(category: 'crash' | 'model-error' | 'protocol' | 'timeout', cause: string): string {
    return `${category} during ${this.stage}: ${cause}`
  }

  private settle(stopReason: StopReason, diagnostic?: string): void {
    if (this.settled) return
    this.settled = true
    this.clearTimers()
    this.request.signal.removeEventListener('abort', this.onAbort)
    const output = selectOutput(
      this.messages.map((text): AssistantMessage => ({ role: 'assistant', content: [{ type: 'text', text }] })),
      this.streamed,
    )
    const lines = [diagnostic, ...this.notes].filter((line): line is string => !!line)
    const result: SubagentResult = { output, stopReason }
    if (lines.length > 0) result.diagnostic = lines.join('; ').replace(/\s+/g, ' ')
    this.resolveResult(result)
  }

  private later(ms: number, action: () => void): void {
    const timer = setTimeout(() => {
      this.timers.delete(timer)
      action()
    }, ms)
    this.timers.add(timer)
  }

  private pause(ms: number): Promise<void> {
    return new Promise((resolve) => this.later(ms, resolve))
  }

  private clearTimers(): void {
    for (const timer of this.timers) clearTimeout(timer)
    this.timers.clear()
  }
}

/** The server's last stderr output on one line, at most `STDERR_QUOTE_CHARS` long. */
function quoteStderr(stderr: string): string {
  // Codex logs with ANSI colours; a diagnostic is plain text.
  const plain = stderr.replace(/\x1b\[[0-9;]*m/g, '').replace(/\s+/g, ' ').trim()
  return plain.length > STDERR_QUOTE_CHARS ? `…${plain.slice(-STDERR_QUOTE_CHARS)}` : plain
}

function errorText(message: string, info: string | undefined): string {
  return info ? `${info}: ${message}` : message
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error)
}

function assertNever(value: never): never {
  throw new Error(`unhandled case: ${JSON.stringify(value)}`)
}
