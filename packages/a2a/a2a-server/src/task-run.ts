/**
 * One A2A task while it runs here: its state, what it publishes on its event bus, and the
 * approval requests its agents are waiting on.
 *
 * **Legs.** The SDK reads a task one message at a time: each message (the first, then
 * each answer on the same task) is one `execute` call whose events the SDK stores and
 * streams until the task ends or enters `input-required`, where the SDK ends that
 * message's stream and keeps the task's bus for the next message. A dsh task is one run
 * of its agent, which does not stop at `input-required` (its tool call waits for the
 * broker's decision), so each `execute` here is a *leg* of the one run: the first starts
 * it, an answer continues it, and each returns at the task's next stop
 * (`input-required` or its end).
 *
 * **Between legs** nobody reads the bus. What the run still does there (a request
 * withdrawn by the broker's time limit, after which the agent goes on; artifacts of work
 * that does not wait) is stored and pushed by an unattended reader of our own (the SDK's
 * `ResultManager` over the task store, and the push sender), from the moment the task
 * enters `input-required` until the next leg, a cancel, or the end.
 *
 * **Approvals.** The requests the broker puts to this task's caller wait here in arrival
 * order; the first is shown (`input-required`, `approvals.ts`'s parts), the others wait
 * their turn. An answer is admitted (`admitAnswer`: checked, reserved for its message)
 * before the SDK stores the message, and applied by the leg that message starts; a
 * request the broker withdraws (its time limit, its call cancelled) leaves the queue, and
 * the next is shown or the task goes back to `working`. Cancelling the task rejects every
 * request at once.
 */
import { TaskState, type Message, type Part, type StreamResponse, type Task } from '@a2a-js/sdk'
import { RequestMalformedError, UnsupportedOperationError } from '@a2a-js/sdk/errors'
import { AgentEvent, ResultManager, type AgentExecutionEvent, type ExecutionEventBus, type ExecutionEventBusManager, type PushNotificationSender, type ServerCallContext, type TaskStore } from '@a2a-js/sdk/server'
import { errorMessage } from '@dsh/base'
import type { ApprovalRequestInfo, FrontEndAnswer } from '@dsh/approvals'
import { APPROVER, approvalParts, CALLER, decisionOf, readAnswer, type A2aAnswer, type Answerer } from './approvals.js'
import { keepAliveEvent, stateName, statusEvent, textPart, type DshStatusMetadata } from './events.js'

/** What a task run needs beside its bus. */
export interface TaskRunParts {
  store: TaskStore
  /** Push notifications of what happens between legs. */
  sender: PushNotificationSender | undefined
  buses: ExecutionEventBusManager
  keepAliveMs: number
  warn(message: string): void
  /** Who may answer a request (`approvals.ts`): any message on the task, or only one from the approver. */
  answerer: Answerer
}

interface WaitingAsk {
  readonly info: ApprovalRequestInfo
  /** Answer the broker (once); stops listening for the withdrawal. */
  settle(answer: FrontEndAnswer): void
  /** Whether the caller has been shown it (it is the one `input-required` names). */
  shown: boolean
}

/** An answer admitted for one message, applied by the leg that message starts. */
export interface Reservation {
  readonly messageId: string
  readonly ask: WaitingAsk
  readonly answer: A2aAnswer
}

const FINAL_STATES: ReadonlySet<TaskState> = new Set([TaskState.TASK_STATE_COMPLETED, TaskState.TASK_STATE_FAILED, TaskState.TASK_STATE_CANCELED, TaskState.TASK_STATE_REJECTED])

export class TaskRun {
  /** Aborts the run (a cancel, the server closing). */
  readonly cancel = new AbortController()
  /** Resolves once the run has ended and its last event was taken. */
  readonly finished: Promise<void>
  /** The task's agent, once made: requests whose chain starts with it are this task's. */
  agentId: string | undefined
  private resolveFinished!: () => void
  private status: { state: TaskState; message: Message | undefined } = { state: TaskState.TASK_STATE_SUBMITTED, message: undefined }
  private keepAlive: NodeJS.Timeout | undefined
  /** Legs waiting for the task's next stop. */
  private stops: Array<() => void> = []
  private unattended: UnattendedReader | undefined
  private readonly asks: WaitingAsk[] = []
  private reservation: Reservation | undefined
  private ended = false

  constructor(
    readonly taskId: string,
    readonly contextId: string,
    private readonly bus: ExecutionEventBus,
    /** The first message's call context: the task store and the bus are scoped by it. */
    private readonly callContext: ServerCallContext,
    private readonly parts: TaskRunParts,
  ) {
    this.finished = new Promise<void>((resolve) => (this.resolveFinished = resolve))
  }

  get state(): TaskState {
    return this.status.state
  }

  /** The task's first event (`submitted`); keep-alives start. */
  begin(task: Task): void {
    this.bus.publish(AgentEvent.task(task))
    this.status = { state: task.status?.state ?? TaskState.TASK_STATE_SUBMITTED, message: task.status?.message }
    this.startKeepAlive()
  }

  /** A status update: a new state, or the final one. */
  enter(state: TaskState, note?: string | Part[], dsh?: DshStatusMetadata): void {
    const event = statusEvent(this.taskId, this.contextId, state, note, dsh)
    this.status = { state, message: event.kind === 'statusUpdate' ? event.data.status?.message : undefined }
    if (state === TaskState.TASK_STATE_SUBMITTED || state === TaskState.TASK_STATE_WORKING) this.startKeepAlive()
    else this.stopKeepAlive()
    this.bus.publish(event)
    if (state === TaskState.TASK_STATE_INPUT_REQUIRED || FINAL_STATES.has(state)) this.reachStop()
    // From here until the next leg, nobody else reads what the run publishes.
    if (state === TaskState.TASK_STATE_INPUT_REQUIRED && !this.ended) this.unattended ??= new UnattendedReader(this.bus, this.parts, this.callContext)
  }

  /** `working`, unless a request is waiting to be shown: then it is shown instead. */
  working(note?: string): void {
    if (this.asks.length > 0) return this.showNext(note)
    this.enter(TaskState.TASK_STATE_WORKING, note)
  }

  /**
   * Progress while working (`calling NAME`, usage): a `working` status that changes no
   * state. Dropped while the task waits for its caller: the task's state is then
   * `input-required`, and its status names the request, which progress must not replace.
   */
  progress(dsh: DshStatusMetadata, note?: string): void {
    if (this.status.state !== TaskState.TASK_STATE_WORKING) return
    this.bus.publish(statusEvent(this.taskId, this.contextId, TaskState.TASK_STATE_WORKING, note, dsh))
  }

  /** An artifact update, published as it comes. */
  publish(event: AgentExecutionEvent): void {
    this.bus.publish(event)
  }

  /** Resolves at the task's next stop: `input-required`, or its end. */
  nextStop(): Promise<void> {
    if (this.ended || this.status.state === TaskState.TASK_STATE_INPUT_REQUIRED) return Promise.resolve()
    return new Promise((resolve) => this.stops.push(resolve))
  }

  /**
   * The broker asks this task's caller (the front-end of `approvals.ts`): the request
   * waits its turn, is shown when it is first, and is answered by the caller's next
   * message, or withdrawn by the broker (`signal`).
   */
  ask(info: ApprovalRequestInfo, signal: AbortSignal): Promise<FrontEndAnswer> {
    if (this.ended || this.cancel.signal.aborted) return Promise.resolve(cancelled('the task is ending'))
    return new Promise<FrontEndAnswer>((resolve) => {
      let done = false
      const waiting: WaitingAsk = {
        info,
        shown: false,
        settle: (answer) => {
          if (done) return
          done = true
          signal.removeEventListener('abort', onAbort)
          resolve(answer)
        },
      }
      const onAbort = () => this.withdraw(waiting, signal.reason)
      signal.addEventListener('abort', onAbort, { once: true })
      this.asks.push(waiting)
      if (this.status.state === TaskState.TASK_STATE_WORKING) this.showNext()
    })
  }

  /**
   * Check a message that names this task as an answer, and reserve it for that message.
   * Throws the A2A error the client receives; nothing is changed then.
   */
  admitAnswer(message: Message, fromApprover: boolean): Reservation {
    if (message.contextId && message.contextId !== this.contextId) {
      throw new RequestMalformedError(`task ${this.taskId} belongs to context ${this.contextId}, not ${message.contextId}; answer it with its own contextId, or none`)
    }
    const head = this.asks[0]
    if (this.status.state !== TaskState.TASK_STATE_INPUT_REQUIRED || head === undefined || !head.shown) {
      throw new UnsupportedOperationError(`task ${this.taskId} is ${stateName(this.status.state)} and is not waiting for an answer; a message on a running task answers its input-required request: wait until it asks (or ends), or cancel it`)
    }
    // The task's caller may not approve its own side effects unless the operator trusts callers.
    if (this.parts.answerer !== 'caller' && !fromApprover) {
      throw new UnsupportedOperationError(
        `task ${this.taskId} waits for its approver's answer to ${head.info.id}, not its caller's: a task's caller may not approve its own side effects; the approver answers with the approver token (dsh a2a serve --approver-token-env NAME), or start the worker with --trust-caller-approvals to let callers answer`,
      )
    }
    if (this.reservation !== undefined) throw new UnsupportedOperationError(`task ${this.taskId} is already taking an answer to ${head.info.id}; wait for its next state`)
    const answer = readAnswer(message, this.parts.answerer === 'approver' ? APPROVER : CALLER)
    if (answer.id !== undefined && answer.id !== head.info.id) {
      const later = this.asks.some((waiting) => waiting.info.id === answer.id)
      const asking = `${head.info.id} (${head.info.tool} ${head.info.display})`
      throw new RequestMalformedError(
        later
          ? `task ${this.taskId} asks one request at a time and is asking ${asking}, not ${answer.id} yet; answer that one first`
          : `task ${this.taskId} is not waiting for an answer to ${JSON.stringify(answer.id).slice(0, 120)} (never asked, or no longer waiting); it is asking ${asking}`,
      )
    }
    const reservation = { messageId: message.messageId, ask: head, answer }
    this.reservation = reservation
    return reservation
  }

  /** The reservation of a message whose leg never began (the request failed before it): the next answer may come. */
  release(reservation: Reservation): void {
    if (this.reservation === reservation) this.reservation = undefined
  }

  /**
   * A leg that continues the task with the answer its message carries (admitted by
   * `admitAnswer`); resolves at the task's next stop. Its first event is the task, as the
   * SDK asks of every leg.
   */
  async continueWith(messageId: string, bus: ExecutionEventBus): Promise<void> {
    if (bus !== this.bus) this.parts.warn(`task ${this.taskId}: a message arrived on another event bus than the task's; its events may not reach that message`)
    await this.stopUnattended()
    this.bus.publish(AgentEvent.task({ id: this.taskId, contextId: this.contextId, status: { state: this.status.state, message: this.status.message, timestamp: new Date().toISOString() }, artifacts: [], history: [], metadata: undefined }))
    const reservation = this.reservation?.messageId === messageId ? this.reservation : undefined
    this.reservation = undefined
    if (reservation === undefined || !this.asks.includes(reservation.ask)) {
      // Withdrawn between its admission and now (the broker's time limit): the answer is void.
      const late = 'your answer arrived after the request it answered was withdrawn; it changed nothing'
      if (this.status.state === TaskState.TASK_STATE_INPUT_REQUIRED) return this.showNext(`${capital(late)}.`)
      this.enter(TaskState.TASK_STATE_WORKING, late)
      return this.nextStop()
    }
    this.answer(reservation)
    return this.nextStop()
  }

  /** Reject every waiting request at once (the task is cancelled). */
  rejectAll(reason: string): void {
    for (const waiting of this.asks.splice(0)) waiting.settle(cancelled(reason))
    this.reservation = undefined
  }

  /** A cancel whose events the SDK's cancel reads itself: stop reading them here first. */
  async handOver(): Promise<void> {
    await this.stopUnattended()
  }

  /** The run is over (its final status published, or it never began): nothing more is published. */
  async end(): Promise<void> {
    if (this.ended) return this.finished
    this.ended = true
    this.stopKeepAlive()
    this.rejectAll('the task ended')
    this.bus.finished()
    this.parts.buses.cleanupByTaskId(this.taskId, this.callContext)
    await this.stopUnattended()
    this.reachStop()
    this.resolveFinished()
  }

  private answer(reservation: Reservation): void {
    const { ask, answer } = reservation
    this.asks.splice(this.asks.indexOf(ask), 1)
    const decision = decisionOf(answer)
    ask.settle(decision)
    const said = decision.decision === 'reject' ? `rejected (${decision.reason})` : decision.decision === 'allow-always' ? 'allowed always' : 'allowed once'
    this.working(`${ask.info.id} (${ask.info.tool} ${ask.info.display}) was ${said} by ${decision.by}`)
  }

  /** Show the first waiting request (`input-required`); none left: back to `working`. */
  private showNext(note?: string): void {
    const head = this.asks[0]
    if (head === undefined) return this.enter(TaskState.TASK_STATE_WORKING, note)
    head.shown = true
    this.enter(TaskState.TASK_STATE_INPUT_REQUIRED, [...(note === undefined ? [] : [textPart(note)]), ...approvalParts(head.info, this.parts.answerer)])
  }

  /** The broker withdrew a request (its time limit, its call cancelled): it leaves the queue; if it was shown, the next is shown or the task works on. */
  private withdraw(waiting: WaitingAsk, reason: unknown): void {
    const index = this.asks.indexOf(waiting)
    waiting.settle(cancelled('the request was withdrawn'))
    if (index === -1) return
    this.asks.splice(index, 1)
    if (this.reservation?.ask === waiting) this.reservation = undefined
    if (!waiting.shown || this.ended || this.cancel.signal.aborted) return
    this.showNext(`${waiting.info.id} (${waiting.info.tool} ${waiting.info.display}) was withdrawn: ${errorMessage(reason)}`)
  }

  private reachStop(): void {
    for (const resolve of this.stops.splice(0)) resolve()
  }

  private startKeepAlive(): void {
    if (this.keepAlive !== undefined || this.ended) return
    this.keepAlive = setInterval(() => this.bus.publish(keepAliveEvent(this.taskId, this.contextId, this.status.state)), this.parts.keepAliveMs)
  }

  private stopKeepAlive(): void {
    clearInterval(this.keepAlive)
    this.keepAlive = undefined
  }

  private async stopUnattended(): Promise<void> {
    const reader = this.unattended
    this.unattended = undefined
    await reader?.stop()
  }
}

function cancelled(reason: string): FrontEndAnswer {
  return { decision: 'reject', by: 'dsh a2a serve', reason, source: 'cancelled' }
}

function capital(text: string): string {
  return text.charAt(0).toUpperCase() + text.slice(1)
}

/**
 * What the SDK does with a message's events, for the events published between legs: each
 * is stored (the SDK's `ResultManager`) and pushed (the push sender), one at a time, in
 * order. The SDK's own reader of the last leg takes every event up to the task's
 * `input-required` and stops there; this one takes every event after it.
 */
class UnattendedReader {
  private chain: Promise<void> = Promise.resolve()
  private readonly results: ResultManager
  private readonly listener = (event: AgentExecutionEvent) => {
    this.chain = this.chain.then(() => this.take(event))
  }

  constructor(
    private readonly bus: ExecutionEventBus,
    private readonly parts: TaskRunParts,
    private readonly callContext: ServerCallContext,
  ) {
    this.results = new ResultManager(parts.store, callContext)
    bus.on('event', this.listener)
  }

  /** Stop listening; resolves once what was heard is stored. */
  stop(): Promise<void> {
    this.bus.off('event', this.listener)
    return this.chain
  }

  private async take(event: AgentExecutionEvent): Promise<void> {
    try {
      await this.results.processEvent(event)
      const response = await this.responseOf(event)
      if (response !== undefined) void this.parts.sender?.send(response, this.callContext, this.results.getCurrentTask()).catch((error: unknown) => this.parts.warn(`a push notification failed: ${errorMessage(error)}`))
    } catch (error) {
      this.parts.warn(`an event of a task waiting for its caller could not be stored: ${errorMessage(error)}`)
    }
  }

  private async responseOf(event: AgentExecutionEvent): Promise<StreamResponse | undefined> {
    switch (event.kind) {
      case 'task':
        return { payload: { $case: 'task', value: (await this.parts.store.load(event.data.id, this.callContext)) ?? event.data } }
      case 'statusUpdate':
        return { payload: { $case: 'statusUpdate', value: event.data } }
      case 'artifactUpdate':
        return { payload: { $case: 'artifactUpdate', value: event.data } }
      case 'message':
        return { payload: { $case: 'message', value: event.data } }
      default:
        return undefined
    }
  }
}

