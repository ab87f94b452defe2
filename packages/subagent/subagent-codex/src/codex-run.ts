/**
 * The Codex wire of one delegation, read top to bottom:
 *
 *   spawn → `initialize` → `initialized` → `thread/start` (ephemeral) → `turn/start`
 *   → publication → notifications until `turn/completed`.
 *
 * The run's lifecycle (start-up race, first-wins settle, cancel grace, timeout, the
 * process exiting, dispose once) is `@dsh/subagent`'s remote run core. This file maps
 * the app-server's messages onto it; every diagnostic is one line, "category during
 * stage: cause".
 */
import { createRequire } from 'node:module'
import { assertNever, errorMessage, type StopReason } from '@dsh/base'
import { processTreeHooks, startRemoteRun, SubagentError, type RemoteEnding, type RemoteRunControl, type RemoteSubagentRun, type RemoteWire, type SubagentRequest, type SubagentResult } from '@dsh/subagent'
import { describeExit, ProcessTree } from '@dsh/process'
import { answerServerRequest } from './approvals.js'
import { readNotification, readThreadId, readTurnId, type AppServerEvent } from './app-server-events.js'
import type { CodexRunSpec } from './config.js'
import { CodexTurnReader } from './turn-reader.js'
import { AppServerConnection, ConnectionClosedError, ProtocolError, RpcError, type IncomingRequest } from './connection.js'

/** Where a run is; startup failures and diagnostics name it. */
export type Stage = 'spawn' | 'initialize' | 'thread/start' | 'turn/start' | 'turn'

/** The kinds of failure a diagnostic starts with. */
type FailureCategory = 'crash' | 'model-error' | 'protocol' | 'timeout'

/** How much of the server's stderr is kept. */
const STDERR_TAIL_CHARS = 4000

const CLIENT_VERSION = (createRequire(import.meta.url)('../package.json') as { version: string }).version

export const CODEX_CHILD_NAME = 'the codex app-server'

export function startCodexRun(spec: CodexRunSpec, request: SubagentRequest): Promise<RemoteSubagentRun> {
  let tree: ProcessTree | undefined
  return startRemoteRun(
    request,
    {
      provider: spec.provider,
      childName: CODEX_CHILD_NAME,
      initialStage: 'spawn' satisfies Stage,
      startupTimeoutMs: spec.startupTimeoutMs,
      startupTimeoutKey: 'startupTimeoutMs',
      timeoutMs: spec.timeoutMs,
      cancelGraceMs: spec.graceMs,
      cancelGraceKey: 'graceMs',
      process: processTreeHooks(() => tree, describeExit),
    },
    (run) => {
      const wire = new CodexWire(spec, run)
      tree = wire.tree
      return wire
    },
  )
}

class CodexWire implements RemoteWire {
  readonly tree: ProcessTree
  private readonly connection: AppServerConnection
  private threadId: string | undefined
  private turnId: string | undefined
  /** The turn's answer, notes, usage and progress. */
  private readonly turn: CodexTurnReader
  readonly interrupt = { name: 'turn/interrupt', send: () => this.sendInterrupt() }

  constructor(
    private readonly spec: CodexRunSpec,
    private readonly run: RemoteRunControl,
  ) {
    this.tree = new ProcessTree({
      command: spec.command.command,
      args: [...spec.command.args, 'app-server'],
      cwd: spec.cwd,
      env: spec.env,
      stderrTailChars: STDERR_TAIL_CHARS,
    })
    this.turn = new CodexTurnReader(run, (reason) => spec.progressDropped?.(reason))
    this.connection = new AppServerConnection(this.tree.child.stdout!, this.tree.child.stdin!, {
      notification: (method, params) => this.onNotification(method, params),
      request: (incoming) => this.onServerRequest(incoming),
      protocolError: (error) => this.onProtocolError(error),
    })
  }

  /** Startup: resolves with the thread id once the turn is accepted. */
  async open(): Promise<string> {
    const { run, connection, spec } = this
    try {
      await this.tree.spawned
      run.moveTo('initialize')
      await connection.request('initialize', {
        clientInfo: { name: 'dsh', title: 'dsh subagent-codex', version: CLIENT_VERSION },
        capabilities: { experimentalApi: false, requestAttestation: false },
      })
      connection.notify('initialized')
      run.moveTo('thread/start')
      const thread = await connection.request('thread/start', {
        cwd: spec.cwd,
        approvalPolicy: spec.approvalPolicy,
        sandbox: spec.sandbox,
        ephemeral: true,
        ...(spec.model !== undefined && { model: spec.model }),
      })
      this.threadId = readThreadId(thread)
      run.moveTo('turn/start')
      const turn = await connection.request('turn/start', {
        threadId: this.threadId,
        input: run.request.prompt.map((block) => ({ type: 'text' as const, text: block.text, text_elements: [] })),
      })
      this.turnId = readTurnId(turn)
    } catch (error) {
      throw await this.describeStartupFailure(error)
    }
    run.moveTo('turn')
    return this.threadId
  }

  private sendInterrupt(): void {
    if (this.threadId === undefined || this.turnId === undefined) return
    this.connection.request('turn/interrupt', { threadId: this.threadId, turnId: this.turnId }).catch(() => {
      // Refused or unanswered: the core's grace period ends the run either way.
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
    if (!event) return
    // A dropped notification is logged whoever it names; the rest must be this run's.
    if (event.type !== 'dropped' && (event.threadId !== this.threadId || (this.turnId !== undefined && event.turnId !== undefined && event.turnId !== this.turnId))) return
    const completed = this.turn.read(event)
    if (completed) this.onTurnCompleted(completed)
  }

  /** The one place a codex turn's end becomes a stop reason. */
  private onTurnCompleted(event: Extract<AppServerEvent, { type: 'turn-completed' }>): void {
    const { run } = this
    switch (event.status) {
      case 'completed':
        return run.settle(this.result('completed', undefined))
      case 'interrupted':
        return run.settle(this.result('aborted', run.stopping === 'cancelled' ? 'the run was cancelled' : 'codex interrupted the turn on its own'))
      case 'failed':
        return run.settle(this.result('error', this.failure('model-error', this.turn.failureCause(event))))
      case 'inProgress':
        return run.settle(this.result('error', this.failure('protocol', 'codex sent turn/completed for a turn still in progress')))
      default:
        return assertNever(event.status, 'turn status')
    }
  }

  private onServerRequest(incoming: IncomingRequest): void {
    const answer = answerServerRequest(incoming.method, incoming.params, this.spec.permissionMode)
    if (answer.note) this.turn.note(answer.note)
    if (answer.kind === 'result') this.connection.respond(incoming.id, answer.result)
    else this.connection.respondError(incoming.id, answer.code, answer.message)
  }

  /** A server that writes garbage cannot be trusted to finish: the run fails and the server is stopped. */
  private onProtocolError(error: ProtocolError): void {
    const { run } = this
    run.failStartup(new SubagentError('START_FAILED', `${CODEX_CHILD_NAME} broke the protocol during ${run.stage}: ${error.message}`), () =>
      run.fail(this.failure('protocol', error.message)),
    )
  }

  private async describeStartupFailure(error: unknown): Promise<SubagentError> {
    const { run } = this
    if (error instanceof SubagentError) return error
    const failed = (message: string) => new SubagentError('START_FAILED', message, { cause: error })
    if (error instanceof RpcError) return failed(`${CODEX_CHILD_NAME} refused ${error.method}: ${error.message}`)
    if (error instanceof ProtocolError) return failed(`${CODEX_CHILD_NAME} broke the protocol during ${run.stage}: ${error.message}`)
    if (error instanceof ConnectionClosedError) {
      // Its stdout closed: the exit (code, stderr) says more than the closed pipe.
      const exit = await this.tree.exitWithin(1000)
      return failed(exit ? run.withStderr(`${CODEX_CHILD_NAME} ${describeExit(exit)} during ${run.stage}`) : `${error.message} during ${run.stage}`)
    }
    if (run.stage === 'spawn') return failed(`${CODEX_CHILD_NAME} could not be started (stage spawn, ${this.spec.command.command}): ${errorMessage(error)}`)
    return failed(`${CODEX_CHILD_NAME} failed during ${run.stage}: ${errorMessage(error)}`)
  }

  startFailed(message: string): SubagentError {
    return new SubagentError('START_FAILED', `${CODEX_CHILD_NAME} could not be started (stage ${this.run.stage}): ${message}`)
  }

  result(stopReason: StopReason, diagnostic: string | undefined, ending?: RemoteEnding): SubagentResult {
    const category = ending === undefined ? undefined : categoryOf(ending)
    return this.turn.result(stopReason, category && diagnostic ? this.failure(category, diagnostic) : diagnostic)
  }

  /**
   * Close stdin (the app-server exits when its input ends) → graceMs → SIGTERM → graceMs
   * → SIGKILL, then drop the connection.
   */
  async close(): Promise<void> {
    try {
      await this.tree.reap({ stdinGraceMs: this.spec.graceMs, termGraceMs: this.spec.graceMs })
    } finally {
      this.connection.close(new ConnectionClosedError('the run was released'))
    }
  }

  /** One line: the category, the stage and the cause. */
  private failure(category: FailureCategory, cause: string): string {
    return `${category} during ${this.run.stage}: ${cause}`
  }
}

/** The category of an ending the run core decided; a cancel is not a failure. */
function categoryOf(ending: RemoteEnding): FailureCategory | undefined {
  switch (ending) {
    case 'timeout':
      return 'timeout'
    case 'lost':
      return 'crash'
    case 'cancelled':
      return undefined
    default:
      return assertNever(ending, 'remote ending')
  }
}
