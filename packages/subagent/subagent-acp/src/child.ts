/**
 * One ACP agent process and its connection: the provider's child file, which the
 * connection file (`connection.ts`, the transport) and the turn file (`turn.ts`) both
 * use. It spawns the agent (its own process group, a cleaned environment), puts the
 * official SDK's client app on its stdio, and opens the session a delegation speaks in:
 *
 *   spawn → `initialize` → `session/new` (with the delegation's lineage in `_meta.dsh`), or
 *   `session/load` to reopen a continuable child's session in a new process.
 *
 * Stdout garbage before `initialize` is answered, an oversized frame, or the process
 * exiting, fail the start (the launch race is `@dsh/subagent`'s). Updates are routed to
 * whoever runs a prompt on the session; anything else (a `session/load` replay) is
 * dropped. The agent's permission requests, and with a shared workspace its `fs/*` and
 * `terminal/*`, are answered here.
 */
import { Readable, Writable } from 'node:stream'
import { createRequire } from 'node:module'
import type { ClientCapabilities, ClientConnection, ContentBlock, LoadSessionRequest, NewSessionRequest, PromptResponse, RequestPermissionRequest, RequestPermissionResponse, SessionUpdate } from '@agentclientprotocol/sdk'
import { errorMessage, type PermissionDecision } from '@dsh/base'
import { subjectOf } from '@dsh/approvals'
import { processOfTree, SubagentError, withStderr, type RemoteChild, type RemoteProcess, type StartControl } from '@dsh/subagent'
import { describeExit, processAlive, ProcessTree } from '@dsh/process'
import { acpChildEnvironment, type AcpRunSpec } from './config.js'
import { answerPermission, approvalAsk, readForwarded, responseOf, type ApprovalScope } from './permission.js'
import { withoutExtensionUpdates } from './extension-updates.js'
import { StdoutGuard } from './stdout-guard.js'
import { FrameLimit } from './frame-limit.js'
import { describeRpcError } from './rpc-error.js'
import { loadAcpSdk, loadedAcpSdk, type AcpSdk } from './sdk.js'
import type { SharedWorkspace } from './shared-workspace.js'
import { acpMcpServers, type McpServerEntry } from './mcp-servers.js'

/** How much of the agent's stderr is kept for diagnostics. */
const STDERR_TAIL_CHARS = 2000

export const ACP_CHILD_NAME = 'the ACP agent'

const { version } = createRequire(import.meta.url)('../package.json') as { version: string }

/**
 * How the session is opened: a new one (a continuable child's must be reopenable), or one an
 * earlier process opened; `servers` are its MCP servers, sent as the agent's capabilities allow.
 */
export type SessionOpening = ({ kind: 'new'; request: NewSessionRequest; continuable: boolean } | { kind: 'load'; request: LoadSessionRequest }) & { servers?: readonly McpServerEntry[] }

/** One ACP agent process and its connection. */
export class AcpChild implements RemoteChild {
  readonly tree: ProcessTree
  readonly process: RemoteProcess
  remoteId: string | undefined
  /** Aborted when the child is closed: requests it had put to the parent's broker are withdrawn at once. */
  private readonly closed = new AbortController()
  /** Aborted when the turn is being stopped: its requests at the parent's broker are withdrawn at once. */
  private turnAsks = new AbortController()
  private _stopping = false

  /** While true, permission requests are answered `cancelled`: the turn is being stopped. */
  get stopping(): boolean {
    return this._stopping
  }

  set stopping(stopping: boolean) {
    if (stopping && !this._stopping) this.turnAsks.abort(new Error('the turn is being stopped'))
    else if (!stopping && this._stopping) this.turnAsks = new AbortController()
    this._stopping = stopping
    // The turn's commands stop with it.
    this.workspace?.setStopping(stopping)
  }
  /** The agent's fs and terminal, served here (`sharedWorkspace: true`, made as the child opens), or absent. */
  private workspace: SharedWorkspace | undefined
  /** The SDK and the connection it made, once the child is open (see `sdk.ts`). */
  private sdk: AcpSdk | undefined
  private connection: ClientConnection | undefined
  private readonly listeners = new Map<string, (update: SessionUpdate) => void>()
  private closing: Promise<void> | undefined
  /** Set once the agent sent a frame over the limit: the connection is unusable from then on. */
  private oversized: string | undefined
  /** The start a limit tripped during, while it runs. */
  private starting: StartControl | undefined

  constructor(
    private readonly spec: AcpRunSpec,
    private readonly cwd: string,
    /** Whose side effects the agent's permission requests are, for the parent's broker (absent: decided by `spec.permission` alone). */
    private readonly approvals?: ApprovalScope,
  ) {
    this.tree = new ProcessTree({ command: spec.command, args: spec.args, cwd, env: acpChildEnvironment(spec), stderrTailChars: STDERR_TAIL_CHARS })
    this.process = processOfTree(this.tree, describeExit)
  }

  /**
   * The SDK, then the shared workspace (whose file imports the SDK too), both imported while
   * the agent process starts: the first child of a process pays for the imports beside its
   * agent's start-up, not before it.
   */
  private async loadWire(): Promise<AcpSdk> {
    const sdk = await loadAcpSdk()
    // Closed meanwhile: `open` stops at its check, and `close` has closed no workspace.
    if (this.spec.sharedWorkspace && this.closing === undefined) {
      const { SharedWorkspace } = await import('./shared-workspace.js')
      const { spec, approvals } = this
      this.workspace = new SharedWorkspace({
        root: this.cwd,
        sessionId: () => this.remoteId,
        decide: (tool, args, signal) => this.decide(tool, args, signal),
        bash: () => spec.bash?.(),
        parent: () => approvals && { id: approvals.parent.id, sandbox: approvals.parent.session.header.sandbox },
        maxTerminals: spec.maxTerminals,
        maxReadBytes: spec.maxFrameBytes,
      })
    }
    return sdk
  }

  /** Up to an open session: initialize, check the protocol (and `loadSession` for a continuable child), then open it. */
  async open(control: StartControl, opening: SessionOpening): Promise<void> {
    this.starting = control
    const guard = new StdoutGuard()
    guard.onGarbage = (line) => control.failStartup(this.startFailed(`it wrote something other than ACP frames to stdout: ${JSON.stringify(line)}; check that the command and args start an ACP agent (e.g. dsh acp)`, control.stage))
    try {
      // Begun before the spawn is confirmed: the process is already starting (the constructor spawned it).
      const wire = this.loadWire()
      // Awaited below; a spawn that fails first leaves it unawaited, and its failure unheard.
      wire.catch(() => {})
      await this.tree.spawned.catch((error: unknown) => {
        throw this.startFailed(`cannot run ${JSON.stringify(this.spec.command)} in ${this.cwd}: ${errorMessage(error)}`, control.stage)
      })
      const sdk = (this.sdk = await wire)
      // Closed while the SDK loaded (a start timeout, a cancel): connect nothing to a reaped process.
      if (this.closing !== undefined) throw this.startFailed('it was closed while it started', control.stage)
      const { methods, PROTOCOL_VERSION } = sdk
      this.connection = this.connect(guard, sdk)
      control.moveTo('initialize')
      const initialized = await this.connection.agent.request(methods.agent.initialize, {
        protocolVersion: PROTOCOL_VERSION,
        clientCapabilities: this.clientCapabilities(),
        clientInfo: { name: 'dsh', title: 'dsh subagent-acp', version },
      })
      if (initialized.protocolVersion !== PROTOCOL_VERSION) throw this.startFailed(`it speaks ACP protocol version ${initialized.protocolVersion}; this client speaks ${PROTOCOL_VERSION}`, control.stage)
      guard.disarm()
      if (opening.kind === 'new' && opening.continuable && initialized.agentCapabilities?.loadSession !== true) {
        throw new SubagentError(
          'UNSUPPORTED_CAPABILITY',
          `the ACP agent (${this.commandLine()}) does not advertise loadSession, so its conversation could not be reopened after a restart: it cannot be a continuable child; delegate to it one-shot, or use an agent that implements session/load (e.g. dsh acp)`,
        )
      }
      // Known only now: whether the agent takes HTTP servers (stdio ones every agent must).
      const mcpServers = acpMcpServers(opening.servers ?? [], initialized.agentCapabilities?.mcpCapabilities, this.commandLine(), (line) => this.spec.warn?.(line))
      if (opening.kind === 'new') {
        control.moveTo('session/new')
        const { sessionId } = await this.connection.agent.request(methods.agent.session.new, { ...opening.request, mcpServers })
        if (typeof sessionId !== 'string' || sessionId === '') throw this.startFailed('session/new answered without a session id', control.stage)
        this.remoteId = sessionId
      } else {
        // The replay of the reopened session reaches no listener and is dropped.
        control.moveTo('session/load')
        await this.connection.agent.request(methods.agent.session.load, { ...opening.request, mcpServers })
        this.remoteId = opening.request.sessionId
      }
    } catch (error) {
      if (error instanceof SubagentError) throw error
      // A JSON-RPC error, or the connection closing because the process died: prefer the death.
      const exit = await this.tree.exitWithin(300)
      throw this.startFailed(exit ? `it ${describeExit(exit)}` : `${control.stage} failed: ${describeRpcError(error)}`, control.stage)
    } finally {
      guard.onGarbage = undefined
      this.starting = undefined
    }
  }

  /**
   * An agent's permission request: up to the parent's approval broker (`ask`, the
   * default), or the fixed policy. Withdrawn when the agent cancels it, the turn is being
   * stopped or the child is closed: then nothing is allowed.
   */
  private async answerPermission(params: RequestPermissionRequest, signal: AbortSignal): Promise<RequestPermissionResponse> {
    if (this.stopping) return { outcome: { outcome: 'cancelled' } }
    const broker = this.spec.permission === 'ask' && this.approvals !== undefined ? this.spec.approvals?.() : undefined
    if (broker === undefined) return answerPermission(this.spec.permission === 'allow' ? 'allow' : 'reject', params.options, this.stopping)
    const withdrawn = AbortSignal.any([signal, this.closed.signal, this.turnAsks.signal])
    const childId = this.approvals!.child ?? `${this.spec.provider}:${params.sessionId}`
    const ask = approvalAsk(params, childId, this.approvals!, withdrawn)
    const decision = await broker.request(ask)
    if (this.stopping || withdrawn.aborted) return { outcome: { outcome: 'cancelled' } }
    // What the broker just allowed, the agent may now do through the shared workspace
    // without being asked a second time (a dsh child asks before each command it sends).
    if (decision.decision !== 'reject') this.workspace?.grant(ask.tool, subjectOf(ask.args).text)
    return responseOf(decision, params.options, readForwarded(params._meta) !== undefined)
  }

  /** What `initialize` offers the agent: a shared workspace's fs and terminal, or nothing (the child serves itself in its own process). */
  private clientCapabilities(): ClientCapabilities {
    return this.workspace?.capabilities() ?? { fs: { readTextFile: false, writeTextFile: false }, terminal: false }
  }

  /**
   * A write or command of the shared workspace: up to the parent's broker as the child's
   * (`ask`, recorded in the parent's session), or the fixed policy, as permission requests are.
   */
  private async decide(tool: 'write' | 'bash', args: Record<string, unknown>, signal: AbortSignal): Promise<PermissionDecision> {
    const scope = this.approvals
    const broker = this.spec.permission === 'ask' && scope !== undefined ? this.spec.approvals?.() : undefined
    if (broker === undefined) {
      const by = `the acp provider (permission: ${this.spec.permission})`
      return this.spec.permission === 'allow' ? { decision: 'allow-once', by, source: 'default' } : { decision: 'reject', by, reason: scope === undefined ? 'no parent agent of this process to decide for' : 'nobody is there to ask', source: 'default' }
    }
    const withdrawn = AbortSignal.any([signal, this.closed.signal, this.turnAsks.signal])
    const child = scope!.child ?? `${this.spec.provider}:${this.remoteId}`
    return broker.request({ agent: scope!.parent, tool, args, signal: withdrawn, remote: { child, name: scope!.name, record: true, ...(scope!.levels && { levels: scope!.levels }) } })
  }

  private connect(guard: StdoutGuard, { client, methods, ndJsonStream }: AcpSdk): ClientConnection {
    const { child } = this.tree
    const app = client({ name: 'dsh-subagent-acp' })
      .onRequest(methods.client.session.requestPermission, ({ params, signal }) => this.answerPermission(params, signal))
      .onNotification(methods.client.session.update, ({ params }) => this.listeners.get(params.sessionId)?.(params.update))
    const { workspace } = this
    if (workspace) {
      // Unregistered (method not found) otherwise, as the capabilities say.
      app
        .onRequest(methods.client.fs.readTextFile, ({ params, signal }) => workspace.readTextFile(params, signal))
        .onRequest(methods.client.fs.writeTextFile, ({ params, signal }) => workspace.writeTextFile(params, signal))
      if (workspace.capabilities().terminal) {
        app
          .onRequest(methods.client.terminal.create, ({ params, signal }) => workspace.createTerminal(params, signal))
          .onRequest(methods.client.terminal.output, ({ params }) => workspace.terminalOutput(params))
          .onRequest(methods.client.terminal.waitForExit, ({ params, signal }) => workspace.waitForTerminalExit(params, signal))
          .onRequest(methods.client.terminal.kill, ({ params }) => workspace.killTerminal(params))
          .onRequest(methods.client.terminal.release, ({ params }) => workspace.releaseTerminal(params))
      }
    }
    const limit = new FrameLimit(this.spec.maxFrameBytes)
    limit.onOversized = (bytes) => {
      this.oversized = limit.describe(bytes)
      this.starting?.failStartup(this.startFailed(this.oversized, this.starting.stage))
      // A turn waiting for its answer learns why at once (see `prompt`).
      this.connection?.close()
    }
    const input = (Readable.toWeb(child.stdout!) as ReadableStream<Uint8Array>).pipeThrough(guard.stream).pipeThrough(limit.stream)
    // The SDK's reader gets a limit above ours, so ours always speaks first.
    return app.connect(withoutExtensionUpdates(ndJsonStream(Writable.toWeb(child.stdin!) as WritableStream<Uint8Array>, input, { maxMessageBytes: this.spec.maxFrameBytes + 1 })))
  }

  /** Why the connection was cut for an oversized frame from the agent, once it has been. */
  get oversizedFrame(): string | undefined {
    return this.oversized
  }

  /** One `session/prompt`; `onUpdate` hears that session's updates until it answers. */
  async prompt(sessionId: string, prompt: ContentBlock[], onUpdate: (update: SessionUpdate) => void): Promise<PromptResponse> {
    this.listeners.set(sessionId, onUpdate)
    try {
      if (this.oversized) throw new Error(this.oversized)
      const { connection, methods } = this.rpc()
      return await connection.agent.request(methods.agent.session.prompt, { sessionId, prompt })
    } catch (error) {
      // Not a RequestError: the turn treats it as a lost connection and stops the agent.
      if (this.oversized) throw new Error(this.oversized, { cause: error })
      throw error
    } finally {
      this.listeners.delete(sessionId)
      this.workspace?.endTurn()
    }
  }

  /** Best-effort `session/cancel`. */
  cancel(sessionId: string): void {
    const { connection, sdk } = this
    if (!connection || !sdk || connection.signal.aborted) return
    connection.agent.notify(sdk.methods.agent.session.cancel, { sessionId }).catch(() => {
      // The connection closed under us: the exit watch settles the turn.
    })
  }

  /**
   * Whether the process is still there to talk to. The process table is asked too: a
   * process killed a moment ago is a zombie, or already gone, before its exit event fires.
   */
  async running(): Promise<boolean> {
    const { pid } = this.tree
    if (this.tree.exit !== undefined || this.closing !== undefined || this.oversized !== undefined || pid === undefined) return false
    return processAlive(pid)
  }

  /** Reap the tree (stdin close → grace → SIGTERM → grace → SIGKILL), then close the connection. Idempotent. */
  close(): Promise<void> {
    this.closed.abort(new Error('the ACP child was closed'))
    // The agent's terminals are this process's: they go with it (`close` never rejects).
    this.closing ??= Promise.all([this.workspace?.close(), this.tree.reap({ stdinGraceMs: this.spec.stdinGraceMs, termGraceMs: this.spec.termGraceMs })])
      .then(() => undefined)
      .finally(() => this.connection?.close())
    return this.closing
  }

  withStderr(message: string): string {
    return withStderr(this.process, message)
  }

  startFailed(message: string, stage: string): SubagentError {
    return acpStartFailed(this.spec, this.withStderr(message), stage)
  }

  private commandLine(): string {
    return commandLine(this.spec)
  }

  private rpc(): { connection: ClientConnection; methods: AcpSdk['methods'] } {
    const { connection, sdk } = this
    if (connection && sdk) return { connection, methods: sdk.methods }
    // A JSON-RPC error when the SDK is there to make one: the turn reads it as the agent's answer.
    const RpcError = loadedAcpSdk()?.RequestError
    const message = 'the ACP connection is not open'
    throw RpcError ? new RpcError(-32603, message) : new Error(message)
  }
}

export function commandLine(spec: Pick<AcpRunSpec, 'command' | 'args'>): string {
  return `${spec.command}${spec.args.length ? ` ${spec.args.join(' ')}` : ''}`
}

export function acpStartFailed(spec: AcpRunSpec, message: string, stage: string): SubagentError {
  return new SubagentError('START_FAILED', `the ACP agent (${commandLine(spec)}) could not be started at stage ${stage}: ${message}`)
}
