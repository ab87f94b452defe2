/**
 * A continuable child in another process, driven through a `RemoteConversation` one turn
 * at a time (its resident entry owns the queue). Its durable record is a local session of
 * its own (the parent-side record): the header holds the lineage and the descriptor with
 * the remote id, and each turn is logged as a user message, the child's answer and a
 * `turn/end`, so listing, authority, turn counting and cold resume read it exactly like
 * an in-process child's session.
 */
import { errorMessage, parseStopReason } from '@dsh/base'
import type { TextBlock, Usage, UserMessage } from '@dsh/llm'
import type { Session } from '@dsh/session'
import type { RemoteConversation } from './types.js'
import type { ProgressSink } from '../types.js'

export class RemoteChildDriver {
  private running: Promise<void> | undefined
  private turns: number
  private disposed = false
  /**
   * Where the current turn's progress goes: set by the manager when the turn starts (it
   * hears the turn's `turn/start`, appended before the message is sent), cleared when it
   * ends; `undefined` when nobody listens.
   */
  progress: ProgressSink | undefined

  constructor(
    readonly session: Session,
    readonly conversation: RemoteConversation,
    private readonly onFault: (error: unknown) => void,
  ) {
    this.turns = 0
    for (const event of session.ownEvents()) if (event.type === 'turn/start') this.turns = event.turn
  }

  get busy(): boolean {
    return this.running !== undefined
  }

  /** Run one turn; resolves when it has ended (logged). One at a time: the caller queues. */
  runTurn(message: UserMessage): Promise<void> {
    if (this.disposed) return Promise.reject(new Error(`remote child ${this.session.id} is disposed`))
    if (this.running) return Promise.reject(new Error(`remote child ${this.session.id} is already running a turn`))
    const running = this.logTurn(message).finally(() => {
      this.running = undefined
    })
    this.running = running
    return running
  }

  cancel(reason: unknown): void {
    if (this.running) this.conversation.cancel(reason)
  }

  whenIdle(): Promise<void> {
    return this.running ?? Promise.resolve()
  }

  async dispose(): Promise<void> {
    this.disposed = true
    if (this.running) this.conversation.cancel(new Error('the parent is going away'))
    await this.conversation.dispose()
    await this.whenIdle()
  }

  private async logTurn(message: UserMessage): Promise<void> {
    const turn = ++this.turns
    const { session } = this
    session.append({ type: 'turn/start', turn })
    session.append({ type: 'step/start', step: 1 })
    session.append({ type: 'user/message', message })
    let output: TextBlock[] = []
    let reason: ReturnType<typeof parseStopReason> = 'error'
    let error: string | undefined
    let usage: Usage | undefined
    try {
      const result = await this.conversation.send(
        message.content.filter((block): block is TextBlock => block.type === 'text'),
        this.progress,
      )
      output = result.output
      if (result.usage !== undefined) usage = { inputTokens: result.usage.inputTokens, outputTokens: result.usage.outputTokens, cacheHitInputTokens: result.usage.cachedInputTokens }
      reason = parseStopReason(result.stopReason) ?? 'error'
      if (reason !== 'completed') error = result.diagnostic ?? (reason === 'error' && result.stopReason !== 'error' ? `unknown stop reason ${result.stopReason}` : undefined)
    } catch (caught) {
      // A conversation must resolve every turn; one that rejects is still recorded as a failed turn.
      error = `the remote child failed: ${errorMessage(caught)}`
      this.onFault(caught)
    }
    if (session.released) return
    // The turn's usage rides on the answer it paid for (a turn without an answer records none).
    if (output.length > 0) session.append({ type: 'assistant/message', message: { role: 'assistant', content: output }, ...(usage && { usage }) })
    session.append({ type: 'step/end', step: 1 })
    session.append(error === undefined ? { type: 'turn/end', turn, reason: reason ?? 'error' } : { type: 'turn/end', turn, reason: reason ?? 'error', error })
  }
}
