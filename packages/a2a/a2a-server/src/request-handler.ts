/**
 * The SDK's request handler with guards in front, before the SDK creates anything:
 *
 * - a message naming a task that is still running here is refused with an A2A error. The
 *   SDK keys a task's event bus by task id, so a second execution would publish into the
 *   running task's stream and end it; the refusal leaves that task untouched;
 * - a message that starts a task has its context admitted (`contexts.ts`): a new one, or
 *   a known one continued, or an error the client receives (an unknown context, one
 *   whose task still runs). The hold is taken over by the task's executor, which releases
 *   it once the task's session is released; a request that fails before the task begins
 *   releases it here.
 */
import type { Message, SendMessageRequest, SendMessageResult, StreamResponse } from '@a2a-js/sdk'
import { DefaultRequestHandler, type ServerCallContext, type TaskStore, type PushNotificationSender, type PushNotificationStore } from '@a2a-js/sdk/server'
import type { AgentCard } from '@a2a-js/sdk'
import type { Contexts, ContextHold } from './contexts.js'
import type { DshAgentExecutor } from './executor.js'

export class DshRequestHandler extends DefaultRequestHandler {
  constructor(
    card: AgentCard,
    store: TaskStore,
    private readonly dshExecutor: DshAgentExecutor,
    private readonly contexts: Contexts,
    push?: { store: PushNotificationStore; sender: PushNotificationSender },
  ) {
    super(card, store, dshExecutor, undefined, push?.store, push?.sender)
  }

  override async sendMessage(params: SendMessageRequest, context: ServerCallContext): Promise<SendMessageResult> {
    const hold = await this.admit(params.message)
    try {
      return await super.sendMessage(params, context)
    } finally {
      if (hold) this.contexts.releaseUntaken(hold)
    }
  }

  override async *sendMessageStream(params: SendMessageRequest, context: ServerCallContext): AsyncGenerator<StreamResponse, void, undefined> {
    const hold = await this.admit(params.message)
    try {
      yield* super.sendMessageStream(params, context)
    } finally {
      if (hold) this.contexts.releaseUntaken(hold)
    }
  }

  /** The guards; the context hold of a message that starts a task. */
  private async admit(message: Message | undefined): Promise<ContextHold | undefined> {
    if (!message) return undefined
    if (message.taskId) {
      this.dshExecutor.refuseRunningTask(message.taskId)
      return undefined
    }
    return this.contexts.admit(message)
  }
}
