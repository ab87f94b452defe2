/**
 * The SDK's request handler with guards in front, before the SDK creates anything:
 *
 * - a message naming a task that is still running here is an answer to the task's
 *   `input-required` request, checked and reserved for that message before the SDK
 *   stores it (`DshAgentExecutor.admitFollowUp`), or refused with an A2A error: the SDK
 *   keys a task's event bus by task id, so a second execution would publish into the
 *   running task's stream and end it; the refusal leaves that task untouched. An answer
 *   whose message fails before its leg begins is released here;
 * - a message that starts a task has its context admitted (`contexts.ts`): a new one, or
 *   a known one continued, or an error the client receives (an unknown context, one
 *   whose task still runs). The hold is taken over by the task's executor, which releases
 *   it once the task's session is released; a request that fails before the task begins
 *   releases it here.
 */
import type { Message, SendMessageRequest, SendMessageResult, StreamResponse } from '@a2a-js/sdk'
import { RequestMalformedError } from '@a2a-js/sdk/errors'
import { DefaultRequestHandler, type ExecutionEventBusManager, type ServerCallContext, type TaskStore, type PushNotificationSender, type PushNotificationStore } from '@a2a-js/sdk/server'
import type { AgentCard } from '@a2a-js/sdk'
import type { Contexts, ContextHold } from './contexts.js'
import type { DshAgentExecutor } from './executor.js'
import type { Reservation } from './task-run.js'
import { APPROVER_USER } from './approver.js'

/** What a message holds from its admission until the SDK is done with it. */
type Admitted = { kind: 'context'; hold: ContextHold } | { kind: 'answer'; taskId: string; reservation: Reservation } | undefined

export class DshRequestHandler extends DefaultRequestHandler {
  constructor(
    card: AgentCard,
    store: TaskStore,
    private readonly dshExecutor: DshAgentExecutor,
    private readonly contexts: Contexts,
    push: { store: PushNotificationStore; sender: PushNotificationSender } | undefined,
    /** The task buses, shared with the executor: a task waiting for its caller keeps its bus between messages. */
    buses: ExecutionEventBusManager,
  ) {
    super(card, store, dshExecutor, buses, push?.store, push?.sender)
  }

  override async sendMessage(params: SendMessageRequest, context: ServerCallContext): Promise<SendMessageResult> {
    const admitted = await this.admit(params.message, context)
    try {
      return await super.sendMessage(params, context)
    } finally {
      this.releaseUntaken(admitted)
    }
  }

  override async *sendMessageStream(params: SendMessageRequest, context: ServerCallContext): AsyncGenerator<StreamResponse, void, undefined> {
    const admitted = await this.admit(params.message, context)
    try {
      yield* super.sendMessageStream(params, context)
    } finally {
      this.releaseUntaken(admitted)
    }
  }

  /** The guards; the context hold of a message that starts a task, or the answer of one that names a running task. */
  private async admit(message: Message | undefined, context: ServerCallContext): Promise<Admitted> {
    if (!message) return undefined
    refuseMalformedParts(message)
    if (message.taskId) {
      const reservation = this.dshExecutor.admitFollowUp(message, context.user === APPROVER_USER)
      return reservation && { kind: 'answer', taskId: message.taskId, reservation }
    }
    return { kind: 'context', hold: await this.contexts.admit(message) }
  }

  private releaseUntaken(admitted: Admitted): void {
    if (admitted?.kind === 'context') this.contexts.releaseUntaken(admitted.hold)
    else if (admitted?.kind === 'answer') this.dshExecutor.releaseUntaken(admitted.taskId, admitted.reservation)
  }
}

/**
 * Every part must say what it holds, and a text part must hold text: a 0.3 client's
 * `{ kind: "text" }` without `text`, or a part of no kind the binding knows, would
 * otherwise reach the agent as nothing at all. Refused with `RequestMalformedError`
 * naming the part, before anything is made.
 */
function refuseMalformedParts(message: Message): void {
  if (!Array.isArray(message.parts)) throw new RequestMalformedError('message.parts must be a list of parts')
  message.parts.forEach((part, index) => {
    const content = part?.content
    if (!content) throw new RequestMalformedError(`message.parts[${index}] holds nothing: a part needs text, a file (url or raw bytes) or data`)
    if (content.$case === 'text' && typeof content.value !== 'string') throw new RequestMalformedError(`message.parts[${index}] is a text part without its text`)
  })
}
