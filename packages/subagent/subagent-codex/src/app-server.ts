/**
 * Connecting to a `codex app-server`: the provider's connection file. One process in its
 * own process group, JSON-RPC on its stdio (`connection.ts`), and the handshake that opens
 * the thread a delegation speaks in:
 *
 *   spawn → `initialize` → `initialized` → `thread/start` (ephemeral for a one-shot run; on
 *   disk under `CODEX_HOME/sessions` for a continuable child) or `thread/resume` (a
 *   continuable child reopened in a new process).
 *
 * Notifications and server requests go to whichever turn runs; between turns they are
 * ignored (requests refused). A protocol error while starting fails the start; during a
 * turn, the turn (the launch race and the turn lifecycle are `@dsh/subagent`'s). A turn is
 * `turn.ts`.
 */
import { createRequire } from 'node:module'
import { errorMessage, isRecord } from '@dsh/base'
import type { TextBlock } from '@dsh/llm'
import { processOfTree, SubagentError, withStderr, type RemoteChild, type RemoteConnection, type RemoteProcess, type RemoteTransport, type StartControl, type TurnControl } from '@dsh/subagent'
import { describeExit, processAlive, ProcessTree } from '@dsh/process'
import { answerServerRequest, brokerAnswer, FileChangePaths, readApproval, type ApprovalScope, type CodexApproval } from './approvals.js'
import type { ApprovalService } from '@dsh/approvals'
import { readNotification, readThreadId, type AppServerEvent } from './app-server-events.js'
import type { CodexRunSpec } from './config.js'
import { AppServerConnection, ConnectionClosedError, ProtocolError, REQUEST_REFUSED, RpcError, type IncomingRequest } from './connection.js'
import type { RequestId } from './protocol/index.js'
import type { UsageBaseline } from './turn-reader.js'
import { CodexTurn } from './turn.js'

const STDERR_TAIL_CHARS = 4000
const CLIENT_VERSION = (createRequire(import.meta.url)('../package.json') as { version: string }).version

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

/** How the thread is opened: a new one (ephemeral: never written to disk), or one written by an earlier process. */
export type ThreadOpening = { kind: 'start'; ephemeral: boolean } | { kind: 'resume'; threadId: string }

/** One `codex app-server` process and its connection. */
export class CodexChild implements RemoteChild {
  readonly tree: ProcessTree
  readonly process: RemoteProcess
  readonly connection: AppServerConnection
  remoteId: string | undefined
  listener: TurnListener | undefined
  private protocolBroken: ProtocolError | undefined
  private closing: Promise<void> | undefined
  /** The start in progress, which a protocol error fails. */
  private starting: StartControl | undefined
  /** Aborted when the child is closed: approvals it had put to the parent's broker are withdrawn at once. */
  private readonly closed = new AbortController()
  /** Approvals waiting for the broker, by request id; aborted when Codex clears one itself (`serverRequest/resolved`). */
  private readonly asking = new Map<RequestId, AbortController>()
  /** The files of each file change in flight, which its approval names only by item. */
  private readonly fileChanges = new FileChangePaths()

  constructor(
    private readonly spec: CodexRunSpec,
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

  /** Up to an open thread: initialize, then start or resume it. */
  async open(control: StartControl, opening: ThreadOpening): Promise<void> {
    const { connection, spec } = this
    this.starting = control
    try {
      await this.tree.spawned
      control.moveTo('initialize')
      await connection.request('initialize', { clientInfo: { name: 'dsh', title: 'dsh subagent-codex', version: CLIENT_VERSION }, capabilities: { experimentalApi: false, requestAttestation: false } })
      connection.notify('initialized')
      const modeFields = { cwd: spec.cwd, approvalPolicy: spec.approvalPolicy, approvalsReviewer: spec.approvalsReviewer, sandbox: spec.sandbox, ...(spec.model !== undefined && { model: spec.model }) }
      if (opening.kind === 'start') {
        control.moveTo('thread/start')
        // A continuable child's thread must be on disk for `thread/resume` after a restart.
        this.remoteId = readThreadId(await connection.request('thread/start', { ...modeFields, ephemeral: opening.ephemeral }))
      } else {
        control.moveTo('thread/resume')
        const resumed = readThreadId(await connection.request('thread/resume', { threadId: opening.threadId, ...modeFields, excludeTurns: true }))
        if (resumed !== opening.threadId) throw this.startFailed(`thread/resume answered with thread ${resumed}, not ${opening.threadId}`, control.stage)
        this.remoteId = resumed
      }
      // After the thread opened: a config.toml Codex cannot load is its own error, said at thread/start.
      control.moveTo('account/read')
      await this.checkLogin()
    } catch (error) {
      throw await this.startFailure(error, control.stage)
    } finally {
      this.starting = undefined
    }
  }

  /**
   * Codex's own login, when its model provider needs one (OpenAI's, Codex's default):
   * without it the turn would wait on a model that never answers, so the start fails in one
   * line saying what to do. A provider of Codex's config.toml with its own key needs none.
   */
  private async checkLogin(): Promise<void> {
    let answer: unknown
    try {
      answer = await this.connection.request('account/read', { refreshToken: false })
    } catch (error) {
      // An app-server without the method: the turn's own errors say the rest.
      if (error instanceof RpcError) return
      throw error
    }
    if (isRecord(answer) && answer.requiresOpenaiAuth === true && answer.account === null) {
      const home = this.spec.env.CODEX_HOME ?? '~/.codex'
      throw new SubagentError('START_FAILED', `${CODEX_CHILD_NAME} has no model to ask: Codex is not logged in (CODEX_HOME ${home}); run \`codex login\` (or \`printenv OPENAI_API_KEY | codex login --with-api-key\`) with that CODEX_HOME, or name a model provider with its own key in its config.toml`)
    }
  }

  /** A failed start in one line: what refused or broke, and the stage. */
  private async startFailure(error: unknown, stage: string): Promise<SubagentError> {
    if (error instanceof SubagentError) return error
    const failed = (message: string) => new SubagentError('START_FAILED', message, { cause: error })
    if (error instanceof RpcError) return failed(`${CODEX_CHILD_NAME} refused ${error.method}: ${error.message}`)
    if (error instanceof ProtocolError) return brokeProtocol(error, stage)
    if (error instanceof ConnectionClosedError || this.tree.exit) {
      // Its stdout closed: the exit (code, stderr) says more than the closed pipe.
      const exit = await this.tree.exitWithin(1000)
      return failed(exit ? this.withStderr(`${CODEX_CHILD_NAME} ${describeExit(exit)} during ${stage}`) : `${errorMessage(error)} during ${stage}`)
    }
    if (stage === 'spawn') return failed(`${CODEX_CHILD_NAME} could not be started (stage spawn, ${this.spec.command.command}): ${errorMessage(error)}`)
    return failed(`${CODEX_CHILD_NAME} failed during ${stage}: ${errorMessage(error)}`)
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

function codexStartFailed(message: string, stage: string): SubagentError {
  return new SubagentError('START_FAILED', `${CODEX_CHILD_NAME} could not be started (stage ${stage}): ${message}`)
}

function brokeProtocol(error: ProtocolError, stage: string): SubagentError {
  return new SubagentError('START_FAILED', `${CODEX_CHILD_NAME} broke the protocol during ${stage}: ${error.message}`)
}

/**
 * The Codex wire for `@dsh/subagent`'s remote lifecycle: a one-shot run's (one ephemeral
 * thread) or a continuable conversation's (a thread on disk, resumed each time its
 * app-server is started again).
 */
export class CodexTransport implements RemoteTransport<CodexChild> {
  readonly childName = CODEX_CHILD_NAME
  readonly interruptName = 'turn/interrupt'
  readonly cancelGraceKey = 'graceMs'
  readonly startupTimeoutKey = 'startupTimeoutMs'
  readonly initialStage = 'spawn'
  readonly turnStage = 'turn/start'
  /** The thread's last usage total, across its turns (Codex re-sends it at the next turn's start). */
  private readonly usageBaseline: UsageBaseline = {}

  constructor(
    /** The spec of the child's turns (cwd, environment, permissions, model, limits). */
    readonly spec: CodexRunSpec,
    /** How the next connection opens its thread. */
    private opening: ThreadOpening,
    /** Whose side effects Codex's approvals are, for the parent's broker. */
    private readonly approvals?: ApprovalScope,
  ) {}

  get provider(): string {
    return this.spec.provider
  }

  get startupTimeoutMs(): number {
    return this.spec.startupTimeoutMs
  }

  get cancelGraceMs(): number {
    return this.spec.graceMs
  }

  get timeoutMs(): number | undefined {
    return this.spec.timeoutMs
  }

  get conversationName(): string {
    return `Codex thread ${this.opening.kind === 'resume' ? this.opening.threadId : '(new)'}`
  }

  storedAt(): string {
    return this.opening.kind === 'start' && this.opening.ephemeral ? 'nowhere: an ephemeral Codex thread' : 'Codex\'s own thread store (CODEX_HOME)'
  }

  /** From now on a connection resumes `threadId` (the conversation's thread, once it exists). */
  resumeWith(threadId: string): void {
    this.opening = { kind: 'resume', threadId }
  }

  connect(control: StartControl): RemoteConnection<CodexChild> {
    const child = new CodexChild(this.spec, this.approvals)
    return { child, opened: child.open(control, this.opening) }
  }

  openTurn(message: TextBlock[], control: TurnControl): CodexTurn {
    return new CodexTurn(this.spec, message, control, this.usageBaseline)
  }

  startFailed(message: string, stage: string): SubagentError {
    return codexStartFailed(message, stage)
  }
}
