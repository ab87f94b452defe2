/**
 * One ACP agent process that outlives a turn: the process tree, the SDK client on its
 * stdio, and the handshake that opens (`session/new`) or reopens (`session/load`) the one
 * session a continuable child speaks in. Updates are routed to whoever runs a prompt on
 * that session; anything else the agent says (a `session/load` replay) is dropped.
 *
 * `launch` is all or nothing: the handshake races the startup timeout, the caller's
 * signal, stdout garbage and the process exiting; whichever ends it first, a failed launch
 * reaps the whole tree before it rejects.
 */
import { Readable, Writable } from 'node:stream'
import { createRequire } from 'node:module'
import { client, methods, ndJsonStream, PROTOCOL_VERSION, RequestError, type ClientConnection, type ContentBlock, type LoadSessionRequest, type NewSessionRequest, type PromptResponse, type SessionUpdate } from '@agentclientprotocol/sdk'
import { errorMessage } from '@dsh/base'
import { quoteStderr, SubagentError } from '@dsh/subagent'
import { describeExit, processAlive, ProcessTree } from '@dsh/process'
import { acpChildEnvironment, type AcpRunSpec } from '../config.js'
import { answerPermission } from '../permission.js'
import { withoutExtensionUpdates } from '../extension-updates.js'
import { StdoutGuard } from '../stdout-guard.js'
import { FrameLimit } from '../frame-limit.js'
import { describeRpcError } from '../rpc-error.js'

export type AcpChildStage = 'spawn' | 'initialize' | 'session/new' | 'session/load'

/** How much of the agent's stderr is kept for diagnostics. */
const STDERR_TAIL_CHARS = 2000

const { version } = createRequire(import.meta.url)('../../package.json') as { version: string }

export class AcpChild {
  readonly tree: ProcessTree
  stage: AcpChildStage = 'spawn'
  /** While true, permission requests are answered `cancelled`: the turn is being stopped. */
  stopping = false
  private connection: ClientConnection | undefined
  private readonly listeners = new Map<string, (update: SessionUpdate) => void>()
  private closing: Promise<void> | undefined
  /** Set once the agent sent a frame over the limit: the connection is unusable from then on. */
  private oversized: string | undefined
  /** Rejects the launch's race when the limit trips during start-up. */
  private onOversizedAtLaunch: ((diagnostic: string) => void) | undefined

  private constructor(
    private readonly spec: AcpRunSpec,
    private readonly cwd: string,
  ) {
    this.tree = new ProcessTree({ command: spec.command, args: spec.args, cwd, env: acpChildEnvironment(spec), stderrTailChars: STDERR_TAIL_CHARS })
  }

  /**
   * Start the agent, require `loadSession` (a continuable child must be reopenable after a
   * restart), then open its session with `openSession`. Resolves with the child and the
   * session id; rejects `ABORTED`, `UNSUPPORTED_CAPABILITY` or `START_FAILED` with nothing
   * left running.
   */
  static async launch(spec: AcpRunSpec, cwd: string, signal: AbortSignal, openSession: (child: AcpChild) => Promise<string>): Promise<{ child: AcpChild; sessionId: string }> {
    if (signal.aborted) throw new SubagentError('ABORTED', 'the delegation was cancelled before the ACP agent was started', { cause: signal.reason })
    const child = new AcpChild(spec, cwd)
    const guard = new StdoutGuard()
    let fail!: (error: SubagentError) => void
    const failed = new Promise<never>((_, reject) => (fail = reject))
    failed.catch(() => {
      // Observed by the race below; a failure after it is of no interest.
    })
    guard.onGarbage = (line) => fail(child.startFailed(`it wrote something other than ACP frames to stdout: ${JSON.stringify(line)}; check that the command and args start an ACP agent (e.g. dsh acp)`))
    child.onOversizedAtLaunch = (diagnostic) => fail(child.startFailed(diagnostic))
    const timer = setTimeout(() => fail(child.startFailed(`it did not finish ${child.stage} within startupTimeoutMs (${spec.startupTimeoutMs} ms)`)), spec.startupTimeoutMs)
    const onAbort = () => fail(new SubagentError('ABORTED', `the delegation was cancelled while the ACP agent was starting (stage ${child.stage})`, { cause: signal.reason }))
    signal.addEventListener('abort', onAbort, { once: true })
    void child.tree.exited.then(async () => {
      const exit = await child.tree.exitWithin(300)
      if (exit) fail(child.startFailed(`it ${describeExit(exit)}`))
    })
    try {
      const sessionId = await Promise.race([child.handshake(guard, openSession), failed])
      return { child, sessionId }
    } catch (error) {
      const reason = error instanceof SubagentError ? error : child.startFailed(errorMessage(error))
      await child.close().catch((reapError: unknown) => {
        throw new SubagentError(reason.code, `${reason.message}; then stopping the ACP agent failed: ${errorMessage(reapError)}`, { cause: error })
      })
      throw reason
    } finally {
      clearTimeout(timer)
      signal.removeEventListener('abort', onAbort)
      guard.onGarbage = undefined
      child.onOversizedAtLaunch = undefined
    }
  }

  private async handshake(guard: StdoutGuard, openSession: (child: AcpChild) => Promise<string>): Promise<string> {
    try {
      await this.tree.spawned.catch((error: unknown) => {
        throw this.startFailed(`cannot run ${JSON.stringify(this.spec.command)} in ${this.cwd}: ${errorMessage(error)}`)
      })
      this.connection = this.connect(guard)
      this.stage = 'initialize'
      const initialized = await this.connection.agent.request(methods.agent.initialize, {
        protocolVersion: PROTOCOL_VERSION,
        // No fs, no terminal: the child serves itself in its own process.
        clientCapabilities: { fs: { readTextFile: false, writeTextFile: false }, terminal: false },
        clientInfo: { name: 'dsh', title: 'dsh subagent-acp', version },
      })
      if (initialized.protocolVersion !== PROTOCOL_VERSION) throw this.startFailed(`it speaks ACP protocol version ${initialized.protocolVersion}; this client speaks ${PROTOCOL_VERSION}`)
      guard.disarm()
      if (initialized.agentCapabilities?.loadSession !== true) {
        throw new SubagentError(
          'UNSUPPORTED_CAPABILITY',
          `the ACP agent (${this.commandLine()}) does not advertise loadSession, so its conversation could not be reopened after a restart: it cannot be a continuable child; delegate to it one-shot, or use an agent that implements session/load (e.g. dsh acp)`,
        )
      }
      return await openSession(this)
    } catch (error) {
      if (error instanceof SubagentError) throw error
      // A JSON-RPC error, or the connection closing because the process died: prefer the death.
      const exit = await this.tree.exitWithin(300)
      throw this.startFailed(exit ? `it ${describeExit(exit)}` : `${this.stage} failed: ${describeRpcError(error)}`)
    }
  }

  private connect(guard: StdoutGuard): ClientConnection {
    const { child } = this.tree
    const app = client({ name: 'dsh-subagent-acp' })
      .onRequest(methods.client.session.requestPermission, ({ params }) => answerPermission(this.spec.permission, params.options, this.stopping))
      .onNotification(methods.client.session.update, ({ params }) => this.listeners.get(params.sessionId)?.(params.update))
    const limit = new FrameLimit(this.spec.maxFrameBytes)
    limit.onOversized = (bytes) => {
      this.oversized = limit.describe(bytes)
      this.onOversizedAtLaunch?.(this.oversized)
      // A turn waiting for its answer learns why at once (see `prompt`).
      this.connection?.close()
    }
    const input = (Readable.toWeb(child.stdout!) as ReadableStream<Uint8Array>).pipeThrough(guard.stream).pipeThrough(limit.stream)
    // The SDK's reader gets a limit above ours, so ours always speaks first.
    return app.connect(withoutExtensionUpdates(ndJsonStream(Writable.toWeb(child.stdin!) as WritableStream<Uint8Array>, input, { maxMessageBytes: this.spec.maxFrameBytes + 1 })))
  }

  async newSession(request: NewSessionRequest): Promise<string> {
    this.stage = 'session/new'
    const { sessionId } = await this.rpc().agent.request(methods.agent.session.new, request)
    if (typeof sessionId !== 'string' || sessionId === '') throw this.startFailed('session/new answered without a session id')
    return sessionId
  }

  /** Reopen `request.sessionId`; its replay reaches no listener and is dropped. */
  async loadSession(request: LoadSessionRequest): Promise<string> {
    this.stage = 'session/load'
    await this.rpc().agent.request(methods.agent.session.load, request)
    return request.sessionId
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
      return await this.rpc().agent.request(methods.agent.session.prompt, { sessionId, prompt })
    } catch (error) {
      // Not a RequestError: the turn's owner treats it as a lost connection and stops the agent.
      if (this.oversized) throw new Error(this.oversized, { cause: error })
      throw error
    } finally {
      this.listeners.delete(sessionId)
    }
  }

  /** Best-effort `session/cancel`. */
  cancel(sessionId: string): void {
    const { connection } = this
    if (!connection || connection.signal.aborted) return
    connection.agent.notify(methods.agent.session.cancel, { sessionId }).catch(() => {
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
    this.closing ??= this.tree.reap({ stdinGraceMs: this.spec.stdinGraceMs, termGraceMs: this.spec.termGraceMs }).finally(() => this.connection?.close())
    return this.closing
  }

  withStderr(message: string): string {
    const tail = quoteStderr(this.tree.stderr())
    return tail && !message.includes(tail) ? `${message}; stderr: ${tail}` : message
  }

  startFailed(message: string): SubagentError {
    return new SubagentError('START_FAILED', this.withStderr(`the ACP agent (${this.commandLine()}) could not be started at stage ${this.stage}: ${message}`))
  }

  private commandLine(): string {
    return `${this.spec.command}${this.spec.args.length ? ` ${this.spec.args.join(' ')}` : ''}`
  }

  private rpc(): ClientConnection {
    if (!this.connection) throw new RequestError(-32603, 'the ACP connection is not open')
    return this.connection
  }
}
