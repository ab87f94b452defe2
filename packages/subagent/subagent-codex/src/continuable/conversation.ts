/**
 * A continuable Codex child: one non-ephemeral thread. While its app-server lives, each
 * message is a new `turn/start` on the thread; when the process is gone (a crash, a turn
 * that timed out or ignored `turn/interrupt`, or a new dsh process resuming a record), the
 * next message starts the app-server again and reopens the thread with `thread/resume`,
 * so Codex continues with its whole history from `CODEX_HOME/sessions`.
 *
 * The turn lifecycle (one turn at a time, first-wins settle, interrupt grace, timeout, the
 * process exiting, dispose once) is `@dsh/subagent`'s `ConversationCore`; this file is the
 * Codex wire of a turn. A turn never rejects for the child's sake.
 */
import { assertNever, errorMessage, type StopReason } from '@dsh/base'
import type { TextBlock } from '@dsh/llm'
import { ConversationCore, EXIT_DRAIN_MS, type ConversationTransport, type ConversationTurn, type ConversationTurnControl, type ProgressSink, type RemoteConversation, type SubagentResult } from '@dsh/subagent'
import { describeExit } from '@dsh/process'
import { readTurnId, type AppServerEvent } from '../app-server-events.js'
import type { CodexRunSpec } from '../config.js'
import { RpcError, type ProtocolError } from '../connection.js'
import { CODEX_CHILD_NAME } from '../codex-run.js'
import { CodexTurnReader, type UsageBaseline } from '../turn-reader.js'
import { CodexChild, type TurnListener } from './codex-child.js'

export class CodexConversation implements RemoteConversation {
  private readonly core: ConversationCore<CodexChild>

  constructor(
    /** The spec of the child's turns (cwd, environment, permissions, model, limits). */
    private readonly spec: CodexRunSpec,
    readonly remoteId: string,
    child: CodexChild | undefined,
  ) {
    this.core = new ConversationCore(new CodexTransport(spec, remoteId), child)
  }

  /** Provider-owned: where the thread runs, and the model it was asked for. */
  get resumeData(): Readonly<Record<string, unknown>> {
    return { cwd: this.spec.cwd, ...(this.spec.model !== undefined && { model: this.spec.model }) }
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

  /** Start the app-server and reopen the thread now (a resume), rather than at the next message. */
  reconnect(signal: AbortSignal): Promise<void> {
    return this.core.reconnect(signal)
  }
}

class CodexTransport implements ConversationTransport<CodexChild> {
  readonly childName = CODEX_CHILD_NAME
  readonly interruptName = 'turn/interrupt'
  readonly cancelGraceKey = 'graceMs'

  /** The thread's last usage total, across its turns (Codex re-sends it at the next turn's start). */
  private readonly usageBaseline: UsageBaseline = {}

  constructor(
    private readonly spec: CodexRunSpec,
    private readonly threadId: string,
  ) {}

  get conversationName(): string {
    return `Codex thread ${this.threadId}`
  }

  get cancelGraceMs(): number {
    return this.spec.graceMs
  }

  get timeoutMs(): number | undefined {
    return this.spec.timeoutMs
  }

  restart(signal: AbortSignal): Promise<CodexChild> {
    return CodexChild.launch(this.spec, { kind: 'resume', threadId: this.threadId }, signal)
  }

  openTurn(message: TextBlock[], control: ConversationTurnControl<CodexChild>): ConversationTurn<CodexChild> {
    return new CodexTurn(this.spec, this.threadId, message, control, this.usageBaseline)
  }

  timedOut(limitMs: number): string {
    return `timeout during turn: it did not finish within timeoutMs (${limitMs} ms); the app-server was stopped, and the next message starts it again`
  }

  lost(child: CodexChild): string {
    const exit = child.tree.exit
    return child.withStderr(`crash during turn: ${CODEX_CHILD_NAME} ${exit ? describeExit(exit) : 'stopped answering'}; the next message starts it again`)
  }
}

/** One `turn/start` and the notifications of its turn, until `turn/completed`. */
class CodexTurn implements ConversationTurn<CodexChild> {
  private turnId: string | undefined
  /** The app-server the turn was delivered to. */
  private current: CodexChild | undefined
  private readonly reader: CodexTurnReader
  private readonly listener: TurnListener

  constructor(
    spec: CodexRunSpec,
    private readonly threadId: string,
    private readonly message: TextBlock[],
    private readonly turn: ConversationTurnControl<CodexChild>,
    usageBaseline: UsageBaseline,
  ) {
    this.reader = new CodexTurnReader(turn, (reason) => spec.progressDropped?.(reason), usageBaseline)
    this.listener = {
      event: (event) => this.onEvent(event),
      note: (note) => this.reader.note(note),
      protocolError: (error: ProtocolError) => {
        if (this.current) turn.fail(`protocol during turn: ${error.message}`, this.current)
      },
    }
  }

  async deliver(child: CodexChild): Promise<void> {
    const { turn } = this
    this.current = child
    child.listener = this.listener
    try {
      const started = await child.connection.request('turn/start', { threadId: this.threadId, input: this.message.map((block) => ({ type: 'text' as const, text: block.text, text_elements: [] })) })
      this.turnId = readTurnId(started)
      // A cancel that came before the turn had an id could not interrupt it: it does now.
      if (turn.cancelled) this.interrupt(child)
    } catch (error) {
      if (turn.settled) return
      if (turn.cancelled) return turn.settle('aborted', 'the turn was cancelled')
      if (error instanceof RpcError) return turn.settle('error', `turn/start refused: ${error.message}`)
      // The connection closed: the core's exit watch reports the process's end.
      if (!(await child.tree.exitWithin(EXIT_DRAIN_MS))) turn.fail(child.withStderr(`turn/start failed: ${errorMessage(error)}`), child)
    }
  }

  private onEvent(event: AppServerEvent): void {
    const { turn } = this
    if (turn.settled || (event.type !== 'dropped' && this.turnId !== undefined && event.turnId !== undefined && event.turnId !== this.turnId)) return
    const completed = this.reader.read(event)
    if (!completed) return
    switch (completed.status) {
      case 'completed':
        return turn.settle('completed')
      case 'interrupted':
        return turn.settle('aborted', turn.cancelled ? 'the turn was cancelled' : 'codex interrupted the turn on its own')
      case 'failed':
        return turn.settle('error', `model-error during turn: ${this.reader.failureCause(completed)}`)
      case 'inProgress':
        return turn.settle('error', 'protocol during turn: codex sent turn/completed for a turn still in progress')
      default:
        return assertNever(completed.status, 'turn status')
    }
  }

  interrupt(child: CodexChild): void {
    if (this.turnId === undefined) return
    child.connection.request('turn/interrupt', { threadId: this.threadId, turnId: this.turnId }).catch(() => {
      // Refused or unanswered: the grace period ends the turn either way.
    })
  }

  detach(child: CodexChild): void {
    if (child.listener === this.listener) child.listener = undefined
  }

  result(stopReason: StopReason, diagnostic: string | undefined): SubagentResult {
    return this.reader.result(stopReason, diagnostic)
  }
}
