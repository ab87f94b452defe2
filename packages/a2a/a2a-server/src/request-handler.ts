/**
 * The SDK's request handler with one guard in front: a message naming a task that is
 * still running here is refused with an A2A error before the SDK creates anything for it.
 * The SDK keys a task's event bus by task id, so a second execution would publish into
 * the running task's stream and end it; the refusal leaves that task untouched.
 */
import type { SendMessageRequest, SendMessageResult, StreamResponse } from '@a2a-js/sdk'
import { DefaultRequestHandler, type ServerCallContext, type TaskStore } from '@a2a-js/sdk/server'
import type { AgentCard } from '@a2a-js/sdk'
import type { DshAgentExecutor } from './executor.js'

export class DshRequestHandler extends DefaultRequestHandler {
  constructor(
    card: AgentCard,
    store: TaskStore,
    private readonly dshExecutor: DshAgentExecutor,
  ) {
    super(card, store, dshExecutor)
  }

  override async sendMessage(params: SendMessageRequest, context: ServerCallContext): Promise<SendMessageResult> {
    this.dshExecutor.refuseRunningTask(params.message?.taskId)
    return super.sendMessage(params, context)
  }

  override async *sendMessageStream(params: SendMessageRequest, context: ServerCallContext): AsyncGenerator<StreamResponse, void, undefined> {
    this.dshExecutor.refuseRunningTask(params.message?.taskId)
    yield* super.sendMessageStream(params, context)
  }
}
