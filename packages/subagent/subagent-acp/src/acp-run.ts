import { stopReasonOfAcp } from '@dsh/base'
/**
 * One delegation to an ACP agent process, top to bottom:
 *
 * 1. spawn the configured command in its own process group, with a cleaned environment;
 * 2. `initialize` → `session/new` through the official SDK's client app, racing every
 *    way startup can fail (spawn error, early exit, garbage on stdout, the startup
 *    timeout, the caller's signal); any failure reaps the tree before `start` rejects;
 * 3. publication: `session/prompt` is sent and the run handed over; the agent's
 *    `agent_message_chunk` text is folded into the output while the first of these
 *    settles the result: the prompt's stop reason, a failed prompt, the process dying,
 *    the run's `timeoutMs`, or a cancel the agent never confirms;
 * 4. `dispose()` cancels what is left and reaps the tree.
 */
import { randomBytes } from 'node:crypto'
import { resolve } from 'node:path'
import { Readable, Writable } from 'node:stream'
import { createRequire } from 'node:module'
import {
  client,
  methods,
  ndJsonStream,
  PROTOCOL_VERSION,
  RequestError,
  type ActiveSession,
  type ClientConnection,
  type NewSessionRequest,
  type SessionUpdate,
} from '@agentclientprotocol/sdk'
import type { TextBlock } from '@dsh/llm'
import { selectOutput, SubagentError, type SubagentRequest, type SubagentResult, type SubagentRun } from '@dsh/subagent'
import { childEnvironment, describeExit, ProcessTree } from '@dsh/process'
import type { AcpRunSpec } from './config.js'
import { answerPermission } from './permission.js'
import { withoutExtensionUpdates } from './extension-updates.js'
import { StdoutGuard } from './stdout-guard.js'

/** Where a run is; every diagnostic names it. */
export type AcpStage = 'spawn' | 'initialize' | 'session/new' | 'session/prompt'

/** After the leader exits, how long the prompt may still settle from frames already written. */
const EXIT_SETTLE_MS = 1000
/** How much of the agent's stderr a diagnostic quotes. */
const STDERR_TAIL_CHARS = 2000

const { version } = createRequire(import.meta.url)('../package.json') as { version: string }

/**
 * `session/new` with the delegation's lineage in `_meta.dsh`. Another dsh (`dsh acp`)
 * records it in the child session's header, so session trees and the depth bound reach
 * across the process boundary; other agents ignore `_meta` they do not know.
 */
export function newSessionRequest(cwd: string, request: SubagentRequest, provider: string): NewSessionRequest {
  const lineage: DshSessionMeta = { parentSession: request.parent.id, delegationDepth: request.parent.depth + 1, provider }
  if (request.label !== undefined) lineage.label = request.label
  return { cwd, mcpServers: [], _meta: { dsh: lineage } }
}

/** What a dsh parent tells a dsh child about itself in `session/new`'s `_meta.dsh`. */
export interface DshSessionMeta {
  parentSession: string
  delegationDepth: number
  provider: string
  label?: string
}

export async function startAcpRun(spec: AcpRunSpec, request: SubagentRequest): Promise<SubagentRun> {
  const { signal } = request
  if (signal.aborted) throw new SubagentError('ABORTED', 'the delegation was cancelled before the ACP agent was started', { cause: signal.reason })
  if (request.agentOptions?.model !== undefined) {
    throw new SubagentError(
      'INVALID_REQUEST',
      `the "${spec.provider}" subagent provider cannot choose the model of an ACP agent (asked for "${request.agentOptions.model}"); choose it in the provider's command or args (e.g. dsh acp --model SPEC) and drop agentOptions.model`,
    )
  }
  const cwd = spec.cwd ?? resolve(request.parent.session.header.cwd)
  const run = new AcpRun(spec, cwd)
  await run.start(request)
  return run.handle()
}

class AcpRun {
  readonly id = `acp-${randomBytes(5).toString('hex')}`
  readonly result: Promise<SubagentResult>
  private stage: AcpStage = 'spawn'
  private tree!: ProcessTree
  private connection: ClientConnection | undefined
  private session: ActiveSession | undefined
  private streamed = ''
  private cancelling = false
  private settled = false
  private settleWith!: (result: SubagentResult) => void
  private readonly timers = new Set<NodeJS.Timeout>()
  private detachSignal: () => void = () => {}
  private reaping: Promise<void> | undefined
  private disposal: Promise<void> | undefined

  constructor(
    private readonly spec: AcpRunSpec,
    private readonly cwd: string,
  ) {
    this.result = new Promise<SubagentResult>((resolveResult) => (this.settleWith = resolveResult))
  }

  handle(): SubagentRun {
    return {
      id: this.id,
      local: false,
      result: this.result,
      cancel: () => this.cancel(),
      dispose: () => this.dispose(),
    }
  }

  /** Everything before publication. Rejects only after the process tree is gone. */
  async start(request: SubagentRequest): Promise<void> {
    const { spec } = this
    this.tree = new ProcessTree({
      command: spec.command,
      args: spec.args,
      cwd: this.cwd,
      env: childEnvironment(process.env, { env: spec.env }),
      stderrTailChars: STDERR_TAIL_CHARS,
    })
    try {
      await this.startup(request)
    } catch (error) {
      await this.reap().catch((reapError: unknown) => {
        throw new SubagentError('START_FAILED', `${messageOf(error)}; then stopping the agent failed: ${messageOf(reapError)}`, { cause: error })
      })
      throw error
    }
    this.publish(request)
  }

  private async startup(request: SubagentRequest): Promise<void> {
    const { spec } = this
    const { signal } = request
    let fail!: (error: SubagentError) => void
    const failed = new Promise<never>((_, reject) => (fail = reject))
    failed.catch(() => {})
    this.addTimer(() => fail(this.startFailed(`it did not finish ${this.stage} within startupTimeoutMs (${spec.startupTimeoutMs} ms); check that the command is an ACP agent, or raise startupTimeoutMs`)), spec.startupTimeoutMs)
    const onAbort = () => fail(new SubagentError('ABORTED', `the delegation was cancelled while the ACP agent was starting (stage: ${this.stage})`, { cause: signal.reason }))
    signal.addEventListener('abort', onAbort, { once: true })
    const guard = new StdoutGuard()
    guard.onGarbage = (line) => fail(this.startFailed(`it wrote something other than ACP frames to stdout: ${JSON.stringify(line)}; check that the command and args start an ACP agent (e.g. dsh acp)`))
    let starting = true
    void this.tree.exited.then(async () => {
      if (!starting) return
      const exit = await this.tree.exitWithin(0)
      fail(this.startFailed(`it ${describeExit(exit!)}`))
    })
    try {
      await Promise.race([this.tree.spawned, failed]).catch((error: unknown) => {
        throw error instanceof SubagentError ? error : this.startFailed(`cannot run ${JSON.stringify(spec.command)} in ${this.cwd}: ${messageOf(error)}`)
      })
      this.connection = this.connect(guard)
      this.stage = 'initialize'
      const initialized = await Promise.race([
        this.connection.agent.request(methods.agent.initialize, {
          protocolVersion: PROTOCOL_VERSION,
          // No fs, no terminal: the child serves itself in its own process.
          clientCapabilities: { fs: { readTextFile: false, writeTextFile: false }, terminal: false },
          clientInfo: { name: 'dsh', title: 'dsh subagent-acp', version },
        }),
        failed,
      ])
      if (initialized.protocolVersion !== PROTOCOL_VERSION) {
        throw this.startFailed(`it speaks ACP protocol version ${initialized.protocolVersion}; this client speaks ${PROTOCOL_VERSION}`)
      }
      guard.disarm()
      this.stage = 'session/new'
      this.session = await Promise.race([this.connection.agent.buildSession(newSessionRequest(this.cwd, request, spec.provider)).start(), failed])
    } catch (error) {
      if (error instanceof SubagentError) throw error
      // A JSON-RPC error, or the connection closing because the process died: prefer the death.
      const exit = await this.tree.exitWithin(300)
      throw this.startFailed(exit ? `it ${describeExit(exit)}` : `${this.stage} failed: ${describeRpcError(error)}`)
    } finally {
      starting = false
      this.clearTimers()
      signal.removeEventListener('abort', onAbort)
      guard.onGarbage = undefined
    }
  }

  private connect(guard: StdoutGuard): ClientConnection {
    const { child } = this.tree
    const app = client({ name: 'dsh-subagent-acp' }).onRequest(methods.client.session.requestPermission, ({ params }) =>
      answerPermission(this.spec.permission, params.options, this.cancelling),
    )
    const input = (Readable.toWeb(child.stdout!) as ReadableStream<Uint8Array>).pipeThrough(guard.stream)
    return app.connect(withoutExtensionUpdates(ndJsonStream(Writable.toWeb(child.stdin!) as WritableStream<Uint8Array>, input)))
  }

  /** Send the prompt and attach every way the result can settle. */
  private publish(request: SubagentRequest): void {
    this.stage = 'session/prompt'
    void this.drive(this.session!, request.prompt)
    void this.tree.exited.then(() => {
      // The agent may have written its answer just before exiting: give those frames a moment.
      if (!this.settled) this.addTimer(() => void this.settleAfterExit(), EXIT_SETTLE_MS)
    })
    if (this.spec.timeoutMs !== undefined) {
      const { timeoutMs } = this.spec
      this.addTimer(() => {
        this.settle(this.failed(`the run exceeded its timeoutMs of ${timeoutMs} ms during session/prompt; the agent was stopped`))
        this.sendCancel()
        void this.reap().catch(() => {
          // dispose() awaits the same reaping and reports its failure.
        })
      }, timeoutMs)
    }
    const { signal } = request
    const onAbort = () => this.cancel()
    signal.addEventListener('abort', onAbort, { once: true })
    this.detachSignal = () => signal.removeEventListener('abort', onAbort)
    if (signal.aborted) this.cancel()
  }

  private async drive(session: ActiveSession, prompt: readonly TextBlock[]): Promise<void> {
    // The outcome arrives through nextUpdate() as well: a `stop`, or the same rejection.
    session.prompt(prompt.map((block) => ({ type: 'text' as const, text: block.text }))).catch(() => {})
    try {
      for (;;) {
        const message = await session.nextUpdate()
        if (message.kind === 'stop') {
          this.settle(this.ended(message.stopReason))
          return
        }
        this.fold(message.update)
      }
    } catch (error) {
      if (this.settled) return
      if (this.cancelling) return this.settle(this.aborted())
      // An error answer is the agent's verdict; anything else is the connection going
      // away, most likely because the process died: wait for the death to report it.
      if (error instanceof RequestError) return this.settle(this.failed(`session/prompt failed: ${describeRpcError(error)}`))
      const exit = await this.tree.exitWithin(EXIT_SETTLE_MS)
      this.settle(exit ? this.crashed() : this.failed(`session/prompt failed: ${describeRpcError(error)}`))
    }
  }

  private fold(update: SessionUpdate): void {
    if (update.sessionUpdate === 'agent_message_chunk' && update.content.type === 'text') this.streamed += update.content.text
  }

  private async settleAfterExit(): Promise<void> {
    if (this.settled) return
    await this.tree.exitWithin(0)
    this.settle(this.cancelling ? this.aborted() : this.crashed())
  }

  cancel(): void {
    if (this.settled || this.cancelling) return
    this.cancelling = true
    this.sendCancel()
    const { cancelGraceMs } = this.spec
    this.addTimer(() => this.settle(this.aborted(`the agent did not confirm session/cancel within cancelGraceMs (${cancelGraceMs} ms)`)), cancelGraceMs)
  }

  dispose(): Promise<void> {
    this.disposal ??= (async () => {
      this.cancel()
      try {
        await this.reap()
      } finally {
        this.settle(this.aborted('the run was disposed before it finished'))
      }
    })()
    return this.disposal
  }

  private sendCancel(): void {
    const { connection, session } = this
    if (!connection || !session || connection.signal.aborted) return
    connection.agent.notify(methods.agent.session.cancel, { sessionId: session.sessionId }).catch(() => {
      // The connection closed under us; the exit watcher or dispose settles the run.
    })
  }

  /** Stop the process tree, then release the connection. Shared by dispose, timeout and startup failure. */
  private reap(): Promise<void> {
    this.reaping ??= (async () => {
      try {
        await this.tree.reap({ stdinGraceMs: this.spec.stdinGraceMs, termGraceMs: this.spec.termGraceMs })
      } finally {
        this.session?.dispose()
        this.connection?.close()
      }
    })()
    return this.reaping
  }

  /** First outcome wins; everything that could still settle the run is detached. */
  private settle(result: SubagentResult): void {
    if (this.settled) return
    this.settled = true
    this.clearTimers()
    this.detachSignal()
    this.settleWith(result)
  }

  private output(): TextBlock[] {
    return selectOutput([], this.streamed)
  }

  private ended(acpStopReason: string): SubagentResult {
    const stopReason = stopReasonOfAcp(acpStopReason)
    if (stopReason === 'completed') return { output: this.output(), stopReason }
    if (stopReason === 'aborted') return this.aborted()
    return { output: this.output(), stopReason, diagnostic: `the ACP agent ended its turn with stop reason "${acpStopReason}"` }
  }

  private aborted(detail?: string): SubagentResult {
    return { output: this.output(), stopReason: 'aborted', diagnostic: `the run was cancelled${detail ? `: ${detail}` : ''}` }
  }

  private crashed(): SubagentResult {
    const exit = this.tree.exit
    return this.failed(`the ACP agent ${exit ? describeExit(exit) : 'stopped answering'} during ${this.stage}`)
  }

  private failed(message: string): SubagentResult {
    return { output: this.output(), stopReason: 'error', diagnostic: this.withStderr(message) }
  }

  private startFailed(message: string): SubagentError {
    const what = `${this.spec.command}${this.spec.args.length ? ` ${this.spec.args.join(' ')}` : ''}`
    return new SubagentError('START_FAILED', this.withStderr(`the ACP agent (${what}) could not be started at stage ${this.stage}: ${message}`))
  }

  private withStderr(message: string): string {
    const stderr = this.tree.stderr()
    return stderr ? `${message}\nstderr (last lines):\n${stderr}` : message
  }

  private addTimer(callback: () => void, ms: number): void {
    const timer = setTimeout(() => {
      this.timers.delete(timer)
      callback()
    }, ms)
    this.timers.add(timer)
  }

  private clearTimers(): void {
    for (const timer of this.timers) clearTimeout(timer)
    this.timers.clear()
  }
}

/** A JSON-RPC error with its details (the SDK puts a handler's message in `data.details`). */
function describeRpcError(error: unknown): string {
  if (error instanceof RequestError) {
    const data = error.data as { details?: unknown } | undefined
    const details = typeof data?.details === 'string' ? data.details : undefined
    return details && !error.message.includes(details) ? `${error.message} (${details})` : error.message
  }
  return messageOf(error)
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error)
}
