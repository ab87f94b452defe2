/**
 * One `codex app-server` process and its wire: the provider's transport, which the
 * connection file (`app-server.ts`, the handshake) and the turn file (`turn.ts`) both use.
 * The process runs in its own process group, JSON-RPC on its stdio (`connection.ts`).
 *
 * Notifications and server requests go to whichever turn runs (its `TurnListener`);
 * between turns they are ignored (requests refused). A protocol error while starting fails
 * the start (`starting`); during a turn, the turn.
 */
import { errorMessage, isRecord } from '@dsh/base'
import { processOfTree, SubagentError, withStderr, type RemoteChild, type RemoteProcess, type StartControl } from '@dsh/subagent'
import { describeExit, processAlive, ProcessTree } from '@dsh/process'
import type { ApprovalService } from '@dsh/approvals'
import { answerServerRequest, brokerAnswer, FileChangePaths, readApproval, type ApprovalScope, type CodexApproval } from './approvals.js'
import { readNotification, type AppServerEvent } from './app-server-events.js'
import type { CodexRunSpec } from './config.js'
import { AppServerConnection, ConnectionClosedError, ProtocolError, REQUEST_REFUSED, type IncomingRequest } from './connection.js'
import type { RequestId } from './protocol/index.js'

const STDERR_TAIL_CHARS = 4000

export const CODEX_CHILD_NAME = 'the codex app-server'

/** What the running turn hears from the app-server. */
export interface TurnListener {
  event(event: AppServerEvent): void
  /** A server request was answered; `note` says what was declined or refused. */
  note(note: string): void
  protocolError(error: ProtocolError): void
  /** Aborted when the turn stops (interrupted, timed out, settled): the approvals it had put to the broker are withdrawn. */
  readonly withdrawn: AbortSignal
}

/** One `codex app-server` process and its connection. */
export class CodexChild implements RemoteChild {
  readonly tree: ProcessTree
  readonly process: RemoteProcess
  readonly connection: AppServerConnection
  remoteId: string | undefined
  listener: TurnListener | undefined
  private protocolBroken: ProtocolError | undefined
  private closing: Promise<void> | undefined
  /** The start in progress (set by the handshake, `app-server.ts`), which a protocol error fails. */
  starting: StartControl | undefined
  /** Aborted when the child is closed: approvals it had put to the parent's broker are withdrawn at once. */
  private readonly closed = new AbortController()
  /** Approvals waiting for the broker, by request id; aborted when Codex clears one itself (`serverRequest/resolved`). */
  private readonly asking = new Map<RequestId, AbortController>()
  /** The files of each file change in flight, which its approval names only by item. */
  private readonly fileChanges = new FileChangePaths()

  constructor(
    readonly spec: CodexRunSpec,
    /** Whose side effects Codex's approvals are, for the parent's broker (absent: decided by `spec.permissionMode` alone). */
    private readonly approvals?: ApprovalScope,
  ) {
    this.tree = new ProcessTree({ command: spec.command.command, args: [...spec.command.args, 'app-server'], cwd: spec.cwd, env: spec.env, stderrTailChars: STDERR_TAIL_CHARS })
    this.process = processOfTree(this.tree, describeExit)
    this.connection = new AppServerConnection(this.tree.child.stdout!, this.tree.child.stdin!, {
      notification: (method, params) => this.onNotification(method, params),
      request: (incoming) => this.onServerRequest(incoming),
      protocolError: (error) => {
        this.protocolBroken = error
        this.starting?.failStartup(brokeProtocol(error, this.starting.stage))
        this.listener?.protocolError(error)
      },
    })
  }

  /** The thread id, once the thread is open. */
  get threadId(): string {
    return this.remoteId!
  }

  private onNotification(method: string, params: unknown): void {
    if (method === 'serverRequest/resolved') return this.onRequestResolved(params)
    this.fileChanges.observe(method, params)
    let event: AppServerEvent | undefined
    try {
      event = readNotification(method, params)
    } catch (error) {
      if (error instanceof ProtocolError) return this.listener?.protocolError(error)
      throw error
    }
    // A dropped notification is logged whoever it names; the rest must be this thread's.
    if (event && (event.type === 'dropped' || event.threadId === this.remoteId)) this.listener?.event(event)
  }

  private onServerRequest(incoming: IncomingRequest): void {
    // Between turns nothing may act for the child: refuse.
    const { listener } = this
    if (!listener) return this.connection.respondError(incoming.id, REQUEST_REFUSED, `${incoming.method} arrived while no turn runs; the dsh codex provider refuses it`)
    const filesOf = (itemId: string) => this.fileChanges.paths(itemId)
    const broker = this.broker()
    const approval = broker && readApproval(incoming.method, incoming.params, filesOf)
    if (broker && approval) return void this.askBroker(incoming.id, approval, broker, listener)
    const answer = answerServerRequest(incoming.method, incoming.params, this.spec.permissionMode, filesOf)
    if (answer.note) listener.note(answer.note)
    if (answer.kind === 'result') this.connection.respond(incoming.id, answer.result)
    else this.connection.respondError(incoming.id, answer.code, answer.message)
  }

  /** The parent's broker, when approvals go there: `ask` mode, a delegation to name them by, a broker composed. */
  private broker(): ApprovalService | undefined {
    return this.spec.permissionMode === 'ask' && this.approvals !== undefined ? this.spec.approvals?.() : undefined
  }

  /**
   * An approval put to the parent's broker: withdrawn when the turn stops, the child is
   * closed or Codex clears the request itself; then nothing is allowed (Codex is told
   * `cancel`, or nothing when it already moved on).
   */
  private async askBroker(id: RequestId, approval: CodexApproval, broker: ApprovalService, listener: TurnListener): Promise<void> {
    const cleared = new AbortController()
    this.asking.set(id, cleared)
    const withdrawn = AbortSignal.any([listener.withdrawn, this.closed.signal, cleared.signal])
    try {
      // A one-shot run's child id is the run's, `<provider>:<thread id>`: the one format of remote runs.
      const childId = this.approvals!.childId ?? `${this.spec.provider}:${this.remoteId}`
      const answer = await brokerAnswer(approval, broker, this.approvals!, childId, withdrawn)
      if (cleared.signal.aborted) return
      if (withdrawn.aborted) return this.connection.respond(id, approval.answer('cancel'))
      if (answer.note) listener.note(answer.note)
      this.connection.respond(id, approval.answer(answer.verdict, answer.reason))
    } catch (error) {
      // Nothing runs that was not allowed: a failure here declines.
      if (!cleared.signal.aborted) this.connection.respond(id, approval.answer('decline', `the approval could not be decided: ${errorMessage(error)}`))
    } finally {
      this.asking.delete(id)
    }
  }

  /** Codex resolved or cleared a request (the turn was interrupted or ended): an approval still at the broker is withdrawn. */
  private onRequestResolved(params: unknown): void {
    const requestId = isRecord(params) ? params.requestId : undefined
    if (typeof requestId === 'string' || typeof requestId === 'number') this.asking.get(requestId)?.abort()
  }

  /** Whether the process still runs and its wire is sound (a zombie, or a broken protocol, does not count). */
  async running(): Promise<boolean> {
    const { pid } = this.tree
    if (this.tree.exit !== undefined || this.closing !== undefined || this.protocolBroken || pid === undefined) return false
    return processAlive(pid)
  }

  /** Close stdin (the app-server exits when its input ends) → graceMs → SIGTERM → graceMs → SIGKILL, then drop the connection. Idempotent. */
  close(): Promise<void> {
    this.closed.abort()
    this.closing ??= this.tree
      .reap({ stdinGraceMs: this.spec.graceMs, termGraceMs: this.spec.graceMs })
      .finally(() => this.connection.close(new ConnectionClosedError('the app-server was released')))
    return this.closing
  }

  withStderr(message: string): string {
    return withStderr(this.process, message)
  }

  startFailed(message: string, stage: string): SubagentError {
    return codexStartFailed(this.withStderr(message), stage)
  }
}

export function codexStartFailed(message: string, stage: string): SubagentError {
  return new SubagentError('START_FAILED', `${CODEX_CHILD_NAME} could not be started (stage ${stage}): ${message}`)
}

export function brokeProtocol(error: ProtocolError, stage: string): SubagentError {
  return new SubagentError('START_FAILED', `${CODEX_CHILD_NAME} broke the protocol during ${stage}: ${error.message}`)
}
