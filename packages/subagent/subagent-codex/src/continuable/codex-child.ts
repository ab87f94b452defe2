/**
 * One `codex app-server` process that outlives a turn, holding one non-ephemeral thread:
 * the thread is started (`thread/start`, `ephemeral: false`, so Codex writes it to
 * `CODEX_HOME/sessions`) or reopened from disk (`thread/resume`). Notifications and server
 * requests go to whichever turn runs; between turns they are ignored (requests refused).
 *
 * `launch` is all or nothing: the handshake races the startup timeout, the caller's signal,
 * protocol errors and the process exiting; a failed launch reaps the tree before it rejects.
 */
import { createRequire } from 'node:module'
import { errorMessage } from '@dsh/base'
import { quoteStderr, SubagentError } from '@dsh/subagent'
import { describeExit, processAlive, ProcessTree } from '@dsh/process'
import { answerServerRequest } from '../approvals.js'
import { readNotification, readThreadId, type AppServerEvent } from '../app-server-events.js'
import type { CodexRunSpec } from '../config.js'
import { AppServerConnection, ConnectionClosedError, ProtocolError, REQUEST_REFUSED, RpcError, type IncomingRequest } from '../connection.js'
import { CODEX_CHILD_NAME } from '../codex-run.js'

const STDERR_TAIL_CHARS = 4000
const CLIENT_VERSION = (createRequire(import.meta.url)('../../package.json') as { version: string }).version

export type CodexChildStage = 'spawn' | 'initialize' | 'thread/start' | 'thread/resume'

/** What the running turn hears from the child. */
export interface TurnListener {
  event(event: AppServerEvent): void
  /** A server request was answered; `note` says what was declined or refused. */
  note(note: string): void
  protocolError(error: ProtocolError): void
}

/** How the thread is opened: a new one, or one written by an earlier process. */
export type ThreadOpening = { kind: 'start' } | { kind: 'resume'; threadId: string }

export class CodexChild {
  readonly tree: ProcessTree
  readonly connection: AppServerConnection
  stage: CodexChildStage = 'spawn'
  threadId = ''
  listener: TurnListener | undefined
  private protocolBroken: ProtocolError | undefined
  private closing: Promise<void> | undefined

  private constructor(private readonly spec: CodexRunSpec) {
    this.tree = new ProcessTree({ command: spec.command.command, args: [...spec.command.args, 'app-server'], cwd: spec.cwd, env: spec.env, stderrTailChars: STDERR_TAIL_CHARS })
    this.connection = new AppServerConnection(this.tree.child.stdout!, this.tree.child.stdin!, {
      notification: (method, params) => this.onNotification(method, params),
      request: (incoming) => this.onServerRequest(incoming),
      protocolError: (error) => {
        this.protocolBroken = error
        this.listener?.protocolError(error)
      },
    })
  }

  static async launch(spec: CodexRunSpec, opening: ThreadOpening, signal: AbortSignal): Promise<CodexChild> {
    if (signal.aborted) throw new SubagentError('ABORTED', `the delegation was cancelled before ${CODEX_CHILD_NAME} was started`, { cause: signal.reason })
    const child = new CodexChild(spec)
    let fail!: (error: SubagentError) => void
    const failed = new Promise<never>((_, reject) => (fail = reject))
    failed.catch(() => {
      // Observed by the race below; a failure after it is of no interest.
    })
    const timer = setTimeout(() => fail(child.startFailed(`it did not finish ${child.stage} within startupTimeoutMs (${spec.startupTimeoutMs} ms)`)), spec.startupTimeoutMs)
    const onAbort = () => fail(new SubagentError('ABORTED', `the delegation was cancelled while ${CODEX_CHILD_NAME} was starting (stage ${child.stage})`, { cause: signal.reason }))
    signal.addEventListener('abort', onAbort, { once: true })
    try {
      await Promise.race([child.handshake(opening), failed])
      return child
    } catch (error) {
      const reason = error instanceof SubagentError ? error : child.startFailed(errorMessage(error))
      await child.close().catch((reapError: unknown) => {
        throw new SubagentError(reason.code, `${reason.message}; then stopping ${CODEX_CHILD_NAME} failed: ${errorMessage(reapError)}`, { cause: error })
      })
      throw reason
    } finally {
      clearTimeout(timer)
      signal.removeEventListener('abort', onAbort)
    }
  }

  private async handshake(opening: ThreadOpening): Promise<void> {
    const { connection, spec } = this
    try {
      await this.tree.spawned
      this.stage = 'initialize'
      await connection.request('initialize', { clientInfo: { name: 'dsh', title: 'dsh subagent-codex', version: CLIENT_VERSION }, capabilities: { experimentalApi: false, requestAttestation: false } })
      connection.notify('initialized')
      const modeFields = { cwd: spec.cwd, approvalPolicy: spec.approvalPolicy, sandbox: spec.sandbox, ...(spec.model !== undefined && { model: spec.model }) }
      if (opening.kind === 'start') {
        this.stage = 'thread/start'
        // Not ephemeral: the thread must be on disk for `thread/resume` after a restart.
        this.threadId = readThreadId(await connection.request('thread/start', { ...modeFields, ephemeral: false }))
      } else {
        this.stage = 'thread/resume'
        const resumed = readThreadId(await connection.request('thread/resume', { threadId: opening.threadId, ...modeFields, excludeTurns: true }))
        if (resumed !== opening.threadId) throw this.startFailed(`thread/resume answered with thread ${resumed}, not ${opening.threadId}`)
        this.threadId = resumed
      }
    } catch (error) {
      if (error instanceof SubagentError) throw error
      if (error instanceof RpcError) throw this.startFailed(`it refused ${error.method}: ${error.message}`)
      if (error instanceof ProtocolError) throw this.startFailed(`it broke the protocol: ${error.message}`)
      if (error instanceof ConnectionClosedError || this.tree.exit) {
        const exit = await this.tree.exitWithin(1000)
        throw this.startFailed(exit ? `it ${describeExit(exit)}` : errorMessage(error))
      }
      throw this.startFailed(this.stage === 'spawn' ? `cannot run ${this.spec.command.command}: ${errorMessage(error)}` : errorMessage(error))
    }
  }

  private onNotification(method: string, params: unknown): void {
    let event: AppServerEvent | undefined
    try {
      event = readNotification(method, params)
    } catch (error) {
      if (error instanceof ProtocolError) return this.listener?.protocolError(error)
      throw error
    }
    if (event && event.threadId === this.threadId) this.listener?.event(event)
  }

  private onServerRequest(incoming: IncomingRequest): void {
    // Between turns nothing may act for the child: refuse.
    if (!this.listener) return this.connection.respondError(incoming.id, REQUEST_REFUSED, `${incoming.method} arrived while no turn runs; the dsh codex provider refuses it`)
    const answer = answerServerRequest(incoming.method, incoming.params, this.spec.permissionMode)
    if (answer.note) this.listener.note(answer.note)
    if (answer.kind === 'result') this.connection.respond(incoming.id, answer.result)
    else this.connection.respondError(incoming.id, answer.code, answer.message)
  }

  /** Whether the process still runs and its wire is sound (a zombie, or a broken protocol, does not count). */
  async running(): Promise<boolean> {
    const { pid } = this.tree
    if (this.tree.exit !== undefined || this.closing !== undefined || this.protocolBroken || pid === undefined) return false
    return processAlive(pid)
  }

  /** Close stdin → graceMs → SIGTERM → graceMs → SIGKILL, then drop the connection. Idempotent. */
  close(): Promise<void> {
    this.closing ??= this.tree
      .reap({ stdinGraceMs: this.spec.graceMs, termGraceMs: this.spec.graceMs })
      .finally(() => this.connection.close(new ConnectionClosedError('the conversation released the app-server')))
    return this.closing
  }

  withStderr(message: string): string {
    const tail = quoteStderr(this.tree.stderr())
    return tail && !message.includes(tail) ? `${message}; stderr: ${tail}` : message
  }

  startFailed(message: string): SubagentError {
    return new SubagentError('START_FAILED', this.withStderr(`${CODEX_CHILD_NAME} could not be started (stage ${this.stage}): ${message}`))
  }
}
