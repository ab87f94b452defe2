/**
 * One Codex turn: the provider's turn file. The message is one `turn/start` on the
 * child's thread (the turn is accepted when the app-server answers with its id); its
 * notifications are read (`turn-reader.ts`) until `turn/completed` settles it, and
 * `turn/interrupt` asks it to stop. Every diagnostic is one line, "category during stage:
 * cause". How the turn ends otherwise (interrupt grace, timeout, the process exiting) is
 * `@dsh/subagent`'s remote lifecycle.
 */
import { assertNever, errorMessage, type StopReason } from '@dsh/base'
import type { TextBlock } from '@dsh/llm'
import { EXIT_DRAIN_MS, SubagentError, type RemoteEnding, type RemoteTurn, type SubagentResult, type TurnControl } from '@dsh/subagent'
import { readTurnId, type AppServerEvent } from './app-server-events.js'
import type { CodexChild, TurnListener } from './child.js'
import type { CodexRunSpec } from './config.js'
import { RpcError, type ProtocolError } from './connection.js'
import { CodexTurnReader, type UsageBaseline } from './turn-reader.js'

/** The kinds of failure a diagnostic starts with. */
type FailureCategory = 'crash' | 'model-error' | 'protocol' | 'timeout'

export class CodexTurn implements RemoteTurn<CodexChild> {
  private turnId: string | undefined
  private readonly reader: CodexTurnReader
  private readonly listener: TurnListener
  /** Aborted when the turn stops: its approvals still at the parent's broker are withdrawn. */
  private readonly stopped = new AbortController()
  /** How long Codex may retry a model that does not answer before the turn fails (`modelRetryLimitMs`). */
  private readonly modelRetryLimitMs: number

  constructor(
    spec: CodexRunSpec,
    private readonly message: TextBlock[],
    private readonly turn: TurnControl,
    usageBaseline: UsageBaseline,
  ) {
    this.modelRetryLimitMs = spec.modelRetryLimitMs
    this.reader = new CodexTurnReader(turn, (reason) => spec.progressDropped?.(reason), usageBaseline)
    this.listener = {
      withdrawn: this.stopped.signal,
      event: (event) => this.onEvent(event),
      note: (note) => this.reader.note(note),
      // A server that writes garbage cannot be trusted to finish: the turn fails and the server is stopped.
      protocolError: (error: ProtocolError) =>
        turn.failStartup(new SubagentError('START_FAILED', `the codex app-server broke the protocol during ${turn.stage}: ${error.message}`), () => turn.fail(this.failure('protocol', error.message))),
    }
  }

  async deliver(child: CodexChild): Promise<void> {
    const { turn } = this
    child.listener = this.listener
    try {
      const started = await child.connection.request('turn/start', { threadId: child.threadId, input: this.message.map((block) => ({ type: 'text' as const, text: block.text, text_elements: [] })) })
      this.turnId = readTurnId(started)
      turn.moveTo('turn')
      turn.accepted()
      // A cancel that came before the turn had an id could not interrupt it: it does now.
      if (turn.stopping !== undefined) this.interrupt(child)
    } catch (error) {
      if (turn.settled) return
      if (turn.stopping === 'cancelled') return turn.settle(this.result('aborted', `the ${turn.scope} was cancelled`))
      if (error instanceof RpcError) {
        const refused = `the codex app-server refused turn/start: ${error.message}`
        return turn.failStartup(new SubagentError('START_FAILED', refused), () => turn.settle(this.result('error', `turn/start refused: ${error.message}`)))
      }
      // The connection closed: the lifecycle's exit watch reports the process's end.
      if (!(await child.tree.exitWithin(EXIT_DRAIN_MS))) turn.fail(child.withStderr(`turn/start failed: ${errorMessage(error)}`))
    }
  }

  private onEvent(event: AppServerEvent): void {
    const { turn } = this
    if (turn.settled || (event.type !== 'dropped' && this.turnId !== undefined && event.turnId !== undefined && event.turnId !== this.turnId)) return
    const completed = this.reader.read(event)
    const retries = this.reader.modelRetries
    if (retries.count > 0 && event.type === 'error' && retries.forMs >= this.modelRetryLimitMs) {
      // Codex would go on waiting (for the network, a server) with nothing to show: fail in one line, in its words.
      return turn.fail(this.failure('model-error', `codex could not reach its model (${retries.count} ${retries.count === 1 ? 'retry' : 'retries'} in ${Math.round(retries.forMs / 1000)} s, the last: ${retries.last}); check its login (codex login) or its model provider's base_url in CODEX_HOME's config.toml`))
    }
    if (!completed) return
    // The one place a codex turn's end becomes a stop reason.
    switch (completed.status) {
      case 'completed':
        return turn.settle(this.result('completed', undefined))
      case 'interrupted':
        return turn.settle(this.result('aborted', turn.stopping === 'cancelled' ? `the ${turn.scope} was cancelled` : 'codex interrupted the turn on its own'))
      case 'failed':
        return turn.settle(this.result('error', this.failure('model-error', this.reader.failureCause(completed))))
      case 'inProgress':
        return turn.settle(this.result('error', this.failure('protocol', 'codex sent turn/completed for a turn still in progress')))
      default:
        return assertNever(completed.status, 'turn status')
    }
  }

  interrupt(child: CodexChild): void {
    // Stopping: nothing the turn asked about may still be allowed.
    this.stopped.abort()
    if (this.turnId === undefined) return
    child.connection.request('turn/interrupt', { threadId: child.threadId, turnId: this.turnId }).catch(() => {
      // Refused or unanswered: the grace period ends the turn either way.
    })
  }

  detach(child: CodexChild): void {
    this.stopped.abort()
    if (child.listener === this.listener) child.listener = undefined
  }

  /** The result, the diagnostic of an ending the lifecycle decided in this file's categories. */
  result(stopReason: StopReason, diagnostic: string | undefined, ending?: RemoteEnding): SubagentResult {
    const category = ending === undefined ? undefined : categoryOf(ending)
    return this.reader.result(stopReason, category && diagnostic ? this.failure(category, diagnostic) : diagnostic)
  }

  /** One line: the category, the stage and the cause. */
  private failure(category: FailureCategory, cause: string): string {
    return `${category} during ${this.turn.stage}: ${cause}`
  }
}

/** The category of an ending the lifecycle decided; a cancel is not a failure. */
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
