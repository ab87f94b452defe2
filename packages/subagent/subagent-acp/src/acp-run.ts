/**
 * The ACP wire of one delegation. The run's lifecycle (start-up race, first-wins settle,
 * cancel grace, timeout, the process exiting, dispose once) is `@dsh/subagent`'s remote
 * run core; this file is what is particular to ACP:
 *
 * 1. spawn the configured command in its own process group, with a cleaned environment;
 * 2. `initialize` → `session/new` (with the delegation's lineage in `_meta.dsh`) through
 *    the official SDK's client app; garbage on stdout fails the start at once;
 * 3. publication: `session/prompt` is sent; the agent's `agent_message_chunk` text is
 *    folded into the output until the prompt's stop reason (or its error) settles it;
 * 4. cancel is `session/cancel`; release reaps the tree and closes the connection.
 */
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
  type PromptResponse,
  type SessionUpdate,
} from '@agentclientprotocol/sdk'
import { errorMessage, stopReasonOfAcp, type StopReason } from '@dsh/base'
import {
  EXIT_DRAIN_MS,
  selectOutput,
  processTreeHooks,
  startRemoteRun,
  SubagentError,
  type RemoteRunControl,
  type RemoteSubagentRun,
  type RemoteWire,
  type SubagentRequest,
  type SubagentResult,
  type SubagentUsage,
} from '@dsh/subagent'
import { describeExit, ProcessTree } from '@dsh/process'
import { acpChildEnvironment, withRecordingGrant, type AcpRunSpec } from './config.js'
import type { RecordingLink } from '@dsh/llm'
import { answerPermission } from './permission.js'
import { withoutExtensionUpdates } from './extension-updates.js'
import { StdoutGuard } from './stdout-guard.js'
import { FrameLimit, refuseOversizedPrompt } from './frame-limit.js'
import { describeRpcError } from './rpc-error.js'
import { AcpProgressReader, usageOfPromptResponse } from './progress.js'

/** Where a run is; every diagnostic names it. */
export type AcpStage = 'spawn' | 'initialize' | 'session/new' | 'session/prompt'

/** How much of the agent's stderr is kept for diagnostics. */
const STDERR_TAIL_CHARS = 2000

const { version } = createRequire(import.meta.url)('../package.json') as { version: string }

/** What a dsh parent tells a dsh child about itself in `session/new`'s `_meta.dsh`. */
export interface DshSessionMeta {
  parentSession: string
  /** The child's own depth: the parent's plus one. */
  delegationDepth: number
  provider: string
  label?: string
  /** The delegation's absolute depth bound, when it has one: the child applies it to its own children. */
  maxDepth?: number
  /** Where and under which lineage the child records or replays its model calls (see @dsh/llm-replay). */
  recording?: RecordingLink
}

/**
 * `session/new` with the delegation's lineage in `_meta.dsh`. Another dsh (`dsh acp`)
 * records it in the child session's header, so session trees and the depth bound reach
 * across the process boundary; other agents ignore `_meta` they do not know.
 */
export function newSessionRequest(cwd: string, request: SubagentRequest, provider: string, recording?: RecordingLink): NewSessionRequest {
  const lineage: DshSessionMeta = { parentSession: request.parent.id, delegationDepth: request.parent.depth + 1, provider }
  if (request.label !== undefined) lineage.label = request.label
  if (request.maxDepth !== undefined) lineage.maxDepth = request.maxDepth
  // The parent records or replays its model calls: the child does the same with its own.
  if (recording !== undefined) lineage.recording = recording
  return { cwd, mcpServers: [], _meta: { dsh: lineage } }
}

export async function startAcpRun(spec: AcpRunSpec, request: SubagentRequest): Promise<RemoteSubagentRun> {
  if (request.agentOptions?.model !== undefined) {
    throw new SubagentError(
      'INVALID_REQUEST',
      `the "${spec.provider}" subagent provider cannot choose the model of an ACP agent (asked for "${request.agentOptions.model}"); choose it in the provider's command or args (e.g. dsh acp --model SPEC) and drop agentOptions.model`,
    )
  }
  // The agent would refuse the prompt's frame: say so before anything is spawned.
  refuseOversizedPrompt(spec.provider, request.prompt, spec.maxFrameBytes)
  const cwd = spec.cwd ?? resolve(request.parent.session.header.cwd)
  spec = withRecordingGrant(spec, spec.recordingLink?.(request.parent.id, request.callId))
  let tree: ProcessTree | undefined
  return startRemoteRun(
    request,
    {
      provider: spec.provider,
      childName: 'the ACP agent',
      initialStage: 'spawn' satisfies AcpStage,
      startupTimeoutMs: spec.startupTimeoutMs,
      startupTimeoutKey: 'startupTimeoutMs',
      timeoutMs: spec.timeoutMs,
      cancelGraceMs: spec.cancelGraceMs,
      cancelGraceKey: 'cancelGraceMs',
      process: processTreeHooks(() => tree, describeExit),
    },
    (run) => {
      const wire = new AcpWire(spec, cwd, run)
      tree = wire.tree
      return wire
    },
  )
}

class AcpWire implements RemoteWire {
  readonly tree: ProcessTree
  private connection: ClientConnection | undefined
  private session: ActiveSession | undefined
  private streamed = ''
  private usage: SubagentUsage | undefined
  private readonly progress: AcpProgressReader
  readonly interrupt = { name: 'session/cancel', send: () => this.sendCancel() }

  constructor(
    private readonly spec: AcpRunSpec,
    private readonly cwd: string,
    private readonly run: RemoteRunControl,
  ) {
    this.tree = new ProcessTree({
      command: spec.command,
      args: spec.args,
      cwd,
      env: acpChildEnvironment(spec),
      stderrTailChars: STDERR_TAIL_CHARS,
    })
    this.progress = new AcpProgressReader(run, (reason) => spec.progressDropped?.(reason))
  }

  async open(): Promise<string> {
    const { run, spec } = this
    const guard = new StdoutGuard()
    guard.onGarbage = (line) =>
      run.failStartup(this.startFailed(`it wrote something other than ACP frames to stdout: ${JSON.stringify(line)}; check that the command and args start an ACP agent (e.g. dsh acp)`), () =>
        run.fail(`the ACP agent wrote something other than ACP frames to stdout: ${JSON.stringify(line)}`),
      )
    try {
      await this.tree.spawned.catch((error: unknown) => {
        throw this.startFailed(`cannot run ${JSON.stringify(spec.command)} in ${this.cwd}: ${errorMessage(error)}`)
      })
      this.connection = this.connect(guard)
      run.moveTo('initialize')
      const initialized = await this.connection.agent.request(methods.agent.initialize, {
        protocolVersion: PROTOCOL_VERSION,
        // No fs, no terminal: the child serves itself in its own process.
        clientCapabilities: { fs: { readTextFile: false, writeTextFile: false }, terminal: false },
        clientInfo: { name: 'dsh', title: 'dsh subagent-acp', version },
      })
      if (initialized.protocolVersion !== PROTOCOL_VERSION) {
        throw this.startFailed(`it speaks ACP protocol version ${initialized.protocolVersion}; this client speaks ${PROTOCOL_VERSION}`)
      }
      guard.disarm()
      run.moveTo('session/new')
      this.session = await this.connection.agent.buildSession(newSessionRequest(this.cwd, run.request, spec.provider, spec.recordingLink?.(run.request.parent.id, run.request.callId))).start()
      return this.session.sessionId
    } catch (error) {
      if (error instanceof SubagentError) throw error
      // A JSON-RPC error, or the connection closing because the process died: prefer the death.
      const exit = await this.tree.exitWithin(300)
      throw this.startFailed(exit ? `it ${describeExit(exit)}` : `${run.stage} failed: ${describeRpcError(error)}`)
    } finally {
      guard.onGarbage = undefined
    }
  }

  private connect(guard: StdoutGuard): ClientConnection {
    const { child } = this.tree
    const app = client({ name: 'dsh-subagent-acp' }).onRequest(methods.client.session.requestPermission, ({ params }) =>
      answerPermission(this.spec.permission, params.options, this.run.stopping !== undefined),
    )
    const limit = new FrameLimit(this.spec.maxFrameBytes)
    limit.onOversized = (bytes) => {
      const diagnostic = limit.describe(bytes)
      this.run.failStartup(this.startFailed(diagnostic), () => this.run.fail(this.run.withStderr(diagnostic)))
    }
    const input = (Readable.toWeb(child.stdout!) as ReadableStream<Uint8Array>).pipeThrough(guard.stream).pipeThrough(limit.stream)
    // The SDK's reader gets a limit above ours, so ours always speaks first.
    return app.connect(withoutExtensionUpdates(ndJsonStream(Writable.toWeb(child.stdin!) as WritableStream<Uint8Array>, input, { maxMessageBytes: this.spec.maxFrameBytes + 1 })))
  }

  begin(): void {
    this.run.moveTo('session/prompt')
    void this.drive(this.session!)
  }

  private async drive(session: ActiveSession): Promise<void> {
    const { run } = this
    // The outcome arrives through nextUpdate() as well: a `stop`, or the same rejection.
    session.prompt(run.request.prompt.map((block) => ({ type: 'text' as const, text: block.text }))).catch(() => {})
    try {
      for (;;) {
        const message = await session.nextUpdate()
        if (message.kind === 'stop') return run.settle(this.ended(message.response))
        this.fold(message.update)
      }
    } catch (error) {
      if (run.settled) return
      if (run.stopping === 'cancelled') return run.settle(this.result('aborted', 'the run was cancelled'))
      // An error answer is the agent's verdict; anything else is the connection going
      // away, most likely because the process died: the core's exit watcher reports that.
      if (error instanceof RequestError) return run.fail(run.withStderr(`session/prompt failed: ${describeRpcError(error)}`))
      if (!(await this.tree.exitWithin(EXIT_DRAIN_MS))) run.fail(run.withStderr(`session/prompt failed: ${describeRpcError(error)}`))
    }
  }

  private fold(update: SessionUpdate): void {
    if (update.sessionUpdate === 'agent_message_chunk' && update.content.type === 'text') this.streamed += update.content.text
    this.progress.read(update)
  }

  private ended(response: PromptResponse): SubagentResult {
    this.usage = usageOfPromptResponse(response, (reason) => this.spec.progressDropped?.(reason))
    if (this.usage) this.run.report({ kind: 'usage', usage: this.usage })
    const acpStopReason = response.stopReason
    const stopReason = stopReasonOfAcp(acpStopReason)
    if (stopReason === 'completed') return this.result(stopReason, undefined)
    if (stopReason === 'aborted') return this.result(stopReason, 'the run was cancelled')
    return this.result(stopReason, `the ACP agent ended its turn with stop reason "${acpStopReason}"`)
  }

  result(stopReason: StopReason, diagnostic: string | undefined): SubagentResult {
    const result: SubagentResult = { output: selectOutput([], this.streamed), stopReason }
    if (diagnostic !== undefined) result.diagnostic = diagnostic
    if (this.usage) result.usage = this.usage
    return result
  }

  startFailed(message: string): SubagentError {
    const what = `${this.spec.command}${this.spec.args.length ? ` ${this.spec.args.join(' ')}` : ''}`
    return new SubagentError('START_FAILED', this.run.withStderr(`the ACP agent (${what}) could not be started at stage ${this.run.stage}: ${message}`))
  }

  private sendCancel(): void {
    const { connection, session } = this
    if (!connection || !session || connection.signal.aborted) return
    connection.agent.notify(methods.agent.session.cancel, { sessionId: session.sessionId }).catch(() => {
      // The connection closed under us; the exit watcher or dispose settles the run.
    })
  }

  /** Stop the process tree, then release the connection. */
  async close(): Promise<void> {
    try {
      await this.tree.reap({ stdinGraceMs: this.spec.stdinGraceMs, termGraceMs: this.spec.termGraceMs })
    } finally {
      this.session?.dispose()
      this.connection?.close()
    }
  }
}
