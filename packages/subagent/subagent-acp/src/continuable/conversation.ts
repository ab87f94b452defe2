/**
 * A continuable ACP child: one ACP session that stays open while its agent process lives;
 * each message is a new `session/prompt` on it. When the process is gone (it crashed, a
 * turn timed out or ignored `session/cancel`, or this is a new dsh process resuming a
 * record), the next message starts the agent again and reopens the session with
 * `session/load`, so the agent continues with its whole history.
 *
 * The turn lifecycle (one turn at a time, first-wins settle, cancel grace, timeout, the
 * process exiting, dispose once) is `@dsh/subagent`'s `ConversationCore`; this file is the
 * ACP wire of a turn. A turn never rejects for the child's sake.
 */
import { stopReasonOfAcp, type StopReason } from '@dsh/base'
import { RequestError, type LoadSessionRequest } from '@agentclientprotocol/sdk'
import { describeExit } from '@dsh/process'
import type { TextBlock } from '@dsh/llm'
import {
  ConversationCore,
  EXIT_DRAIN_MS,
  selectOutput,
  SubagentError,
  type ConversationTransport,
  type ConversationTurn,
  type ConversationTurnControl,
  type ProgressSink,
  type RemoteConversation,
  type SubagentResult,
  type SubagentUsage,
} from '@dsh/subagent'
import type { AcpRunSpec } from '../config.js'
import { describeRpcError } from '../rpc-error.js'
import { refuseOversizedPrompt } from '../frame-limit.js'
import { AcpProgressReader, usageOfPromptResponse } from '../progress.js'
import { AcpChild } from './acp-child.js'

/** What a conversation needs to reopen its session in a fresh process. */
export interface AcpReopen {
  cwd: string
  /** The parent's session id, sent as `_meta.dsh.parentSession` so a dsh child checks it is reopened by its own parent. */
  parentSession: string
  /** The child's depth. */
  depth: number
}

export class AcpConversation implements RemoteConversation {
  private readonly core: ConversationCore<AcpChild>

  constructor(
    spec: AcpRunSpec,
    readonly remoteId: string,
    private readonly reopen: AcpReopen,
    child: AcpChild | undefined,
  ) {
    this.core = new ConversationCore(new AcpTransport(spec, remoteId, reopen), child)
  }

  /** Provider-owned: where the session lives, so a later process can reopen it. */
  get resumeData(): Readonly<Record<string, unknown>> {
    return { cwd: this.reopen.cwd }
  }

  get pid(): number | undefined {
    return this.core.pid
  }

  send(message: TextBlock[], progress?: ProgressSink): Promise<SubagentResult> {
    return this.core.send(message, progress)
  }

  cancel(reason?: unknown): void {
    this.core.cancel(reason)
  }

  dispose(): Promise<void> {
    return this.core.dispose()
  }

  /** Start the agent and reopen the session now (a resume), rather than at the next message. */
  reconnect(signal: AbortSignal): Promise<void> {
    return this.core.reconnect(signal)
  }
}

class AcpTransport implements ConversationTransport<AcpChild> {
  readonly childName = 'the ACP agent'
  readonly interruptName = 'session/cancel'
  readonly cancelGraceKey = 'cancelGraceMs'

  constructor(
    private readonly spec: AcpRunSpec,
    private readonly remoteId: string,
    private readonly reopen: AcpReopen,
  ) {}

  get conversationName(): string {
    return `ACP session ${this.remoteId}`
  }

  get cancelGraceMs(): number {
    return this.spec.cancelGraceMs
  }

  get timeoutMs(): number | undefined {
    return this.spec.timeoutMs
  }

  /** A fresh process with the session reopened through `session/load`. */
  async restart(signal: AbortSignal): Promise<AcpChild> {
    const { cwd, parentSession, depth } = this.reopen
    const request: LoadSessionRequest = { sessionId: this.remoteId, cwd, mcpServers: [], _meta: { dsh: { parentSession, delegationDepth: depth, provider: this.spec.provider } } }
    const { child } = await AcpChild.launch(this.spec, cwd, signal, (opening) => opening.loadSession(request))
    return child
  }

  refuse(message: TextBlock[]): string | undefined {
    try {
      refuseOversizedPrompt(this.spec.provider, message, this.spec.maxFrameBytes)
      return undefined
    } catch (error) {
      if (error instanceof SubagentError) return error.message
      throw error
    }
  }

  openTurn(message: TextBlock[], control: ConversationTurnControl<AcpChild>): ConversationTurn<AcpChild> {
    return new AcpTurn(this.spec, this.remoteId, message, control)
  }

  timedOut(limitMs: number): string {
    return `the ACP agent did not finish within timeoutMs (${limitMs} ms) (stage session/prompt); it was stopped, and the next message starts it again`
  }

  lost(child: AcpChild): string {
    const exit = child.tree.exit
    return child.withStderr(`the ACP agent ${exit ? describeExit(exit) : 'stopped answering'} during session/prompt; the next message starts it again`)
  }
}

/** One `session/prompt`: its streamed text, its progress and its usage. */
class AcpTurn implements ConversationTurn<AcpChild> {
  private streamed = ''
  private usage: SubagentUsage | undefined
  private readonly progress: AcpProgressReader

  constructor(
    private readonly spec: AcpRunSpec,
    private readonly sessionId: string,
    private readonly message: TextBlock[],
    private readonly turn: ConversationTurnControl<AcpChild>,
  ) {
    this.progress = new AcpProgressReader(turn, (reason) => spec.progressDropped?.(reason))
  }

  async deliver(child: AcpChild): Promise<void> {
    const { turn } = this
    try {
      const response = await child.prompt(this.sessionId, this.message.map((block) => ({ type: 'text' as const, text: block.text })), (update) => {
        if (turn.settled) return
        if (update.sessionUpdate === 'agent_message_chunk' && update.content.type === 'text') this.streamed += update.content.text
        this.progress.read(update)
      })
      this.usage = usageOfPromptResponse(response, (reason) => this.spec.progressDropped?.(reason))
      if (this.usage) turn.report({ kind: 'usage', usage: this.usage })
      const stopReason = stopReasonOfAcp(response.stopReason)
      if (stopReason === 'completed') turn.settle(stopReason)
      else if (stopReason === 'aborted') turn.settle(stopReason, 'the turn was cancelled')
      else turn.settle(stopReason, `the ACP agent ended its turn with stop reason "${response.stopReason}"`)
    } catch (error) {
      if (turn.settled) return
      if (turn.cancelled) return turn.settle('aborted', 'the turn was cancelled')
      // An error answer is the agent's verdict; anything else is the connection going
      // away, most likely because the process died: the core's exit watch reports that.
      if (error instanceof RequestError) return turn.settle('error', child.withStderr(`session/prompt failed: ${describeRpcError(error)}`))
      // We cut the connection over an oversized frame: that is the reason, whatever the
      // agent does next (closing its input usually makes it exit at once, and the exit
      // watch must not report that exit as the cause).
      const oversized = child.oversizedFrame
      if (oversized !== undefined) return turn.fail(oversized, child)
      if (!(await child.tree.exitWithin(EXIT_DRAIN_MS))) turn.fail(child.withStderr(`session/prompt failed: ${describeRpcError(error)}`), child)
    }
  }

  interrupt(child: AcpChild): void {
    // Permission asks from now on are answered `cancelled`: the turn is being stopped.
    child.stopping = true
    child.cancel(this.sessionId)
  }

  detach(child: AcpChild): void {
    child.stopping = false
  }

  result(stopReason: StopReason, diagnostic: string | undefined): SubagentResult {
    const result: SubagentResult = { output: selectOutput([], this.streamed), stopReason }
    if (diagnostic !== undefined) result.diagnostic = diagnostic
    if (this.usage) result.usage = this.usage
    return result
  }
}
