/**
 * One A2A run: the provider's turn file (an A2A delegation is one task, one turn).
 *
 * 1. reach the worker (`worker.ts`: its client, its agent card);
 * 2. send the prompt as a streamed message with the lineage in `metadata.dsh`; the first
 *    event names the task, whose id is the child's remote id (the turn is accepted);
 * 3. status and artifact updates are folded until a final state settles it; a worker
 *    whose card promises keep-alives and then sends nothing for `SILENT_PERIODS` of them
 *    has gone silent (link down, process stopped): the run ends `error` and the worker is
 *    marked;
 * 4. a task in `input-required` with a dsh worker's approval request is answered through
 *    the parent's approval broker (`approvals.ts`): the request is put to the broker, the
 *    decision sent as the next message on the same task, and that message's stream read
 *    on (each message is one leg of the task); an `input-required` without such a request
 *    (a question for the caller) ends the run `error` saying what it asked, and the task is
 *    cancelled there;
 * 5. cancel is the protocol's task cancel (and withdraws a request pending at the
 *    parent's broker); closing the child aborts the HTTP stream.
 *
 * A worker that does not answer (refused connection, reset, a stream cut mid-answer) is
 * marked so the next runs skip it, and the run that hit it ends `error` with a
 * diagnostic naming the worker: it does not reject the start, so a fan-out over several
 * workers sees one settled result per delegation. The lifecycle (cancel grace, timeout)
 * is `@dsh/subagent`'s.
 */
import { randomUUID } from 'node:crypto'
import type { Message, Part, StreamResponse, TaskState } from '@a2a-js/sdk'
import { assertNever, errorMessage, isAbortError, type PermissionDecision, type StopReason } from '@dsh/base'
import { text, type TextBlock } from '@dsh/llm'
import { A2A_LINEAGE, SubagentError, type Lineage, type RemoteTurn, type SubagentResult, type SubagentUsage, type TurnControl } from '@dsh/subagent'
import type { A2aRunSpec } from './config.js'
import { answerMessage, approvalAsk, readWorkerApproval, type A2aApprovalScope, type WorkerApproval } from './approvals.js'
import { A2aProgressReader } from './progress.js'
import { stopReasonOfTaskState, taskStateName } from './task-state.js'
import { CANCEL_GRACE_MS, CONNECT_TIMEOUT_MS, type A2aChild, type A2aConversation } from './child.js'
import { isTokenRefused } from './worker-pool.js'
import { a2aSdk } from './sdk.js'

type TaskStream = AsyncGenerator<StreamResponse, void, undefined>

/** The artifact `dsh a2a serve` puts the final answer in (streamed text goes elsewhere). */
export const ANSWER_ARTIFACT = 'answer'
/** A worker that promised keep-alives and sent nothing for this many of their periods has gone silent. */
export const SILENT_PERIODS = 5

export class A2aTurn implements RemoteTurn<A2aChild> {
  private child: A2aChild | undefined
  private taskId: string | undefined
  /** The context the worker put the task in. */
  private contextId: string | undefined
  /** Artifact text by artifact id, in the order they appeared. */
  private readonly artifacts = new Map<string, string>()
  private statusText = ''
  /** The last status message heard, whole. */
  private lastStatusMessage: Message | undefined
  private readonly progress: A2aProgressReader
  private usage: SubagentUsage | undefined
  /** When the worker last sent anything on the task's stream. */
  private lastHeard = Date.now()
  /** The keep-alive period the worker's card promises, if it promises one. */
  private keepAliveMs: number | undefined
  /** The task's state as last heard (a snapshot's included). */
  private state: TaskState | undefined
  /** The status message of the task's `input-required`, once a status update put it there and until it is answered. */
  private inputRequired: { message: Message | undefined } | undefined
  /** The approval requests answered in this run: one asked again is not answered twice. */
  private readonly answered = new Set<string>()
  /** Aborted when the run is stopped or settles: a request pending at the parent's broker is withdrawn. */
  private readonly asks = new AbortController()
  /** While the parent's broker decides, nothing is read from the worker: its silence then means nothing. */
  private betweenLegs = false

  constructor(
    private readonly spec: A2aRunSpec,
    private readonly prompt: TextBlock[],
    private readonly run: TurnControl,
    /** What the worker is told about the delegation, in `metadata.dsh`. */
    private readonly lineage: Lineage,
    /** A continuable child's context, which the task is part of; none for a one-shot run. */
    private readonly conversation?: A2aConversation,
    /** Whose side effects the worker's approval requests are, for the parent's broker. */
    private readonly approvals?: A2aApprovalScope,
  ) {
    this.progress = new A2aProgressReader(run, (reason) => spec.progressDropped?.(reason))
  }

  /** The worker this run holds. */
  private get worker() {
    return this.child!.worker
  }

  async deliver(child: A2aChild): Promise<void> {
    this.child = child
    let stream = await this.open(child)
    if (stream === undefined) return
    this.run.moveTo('task')
    this.watchSilence()
    // Each message on the task is one leg: the first, then each answer to its input-required.
    while (stream !== undefined) {
      if ((await this.drive(stream)) !== 'input-required') return
      stream = await this.answerInput()
    }
  }

  /** Up to the task's first event: the stream to read on, or `undefined` when the run has ended already. */
  private async open(child: A2aChild): Promise<TaskStream | undefined> {
    // Only this timer means the worker did not answer; an abort by close() (the delegation
    // was cancelled or released while starting) says nothing about the worker.
    let timedOut = false
    const timer = setTimeout(() => {
      timedOut = true
      child.connection.abort(new SubagentError('START_FAILED', `no answer within ${CONNECT_TIMEOUT_MS} ms`))
    }, CONNECT_TIMEOUT_MS)
    try {
      const { client, keepAliveMs } = await child.connect()
      this.keepAliveMs = keepAliveMs
      this.run.moveTo('message/stream')
      // The trace context also as W3C HTTP headers, where a worker's own HTTP tracing looks (the message metadata carries it for dsh).
      const stream = client.sendMessageStream({ tenant: '', message: this.message(), configuration: undefined, metadata: undefined }, { signal: child.connection.signal, ...(this.lineage.trace && { serviceParameters: traceHeaders(this.lineage.trace) }) })
      child.stream = stream
      const first = await stream.next()
      if (first.done) return this.unanswered('closed the stream before naming a task')
      this.lastHeard = Date.now()
      this.worker.markAnswering()
      const early = this.fold(first.value)
      const elsewhere = this.inContext(this.contextId ?? '')
      if (elsewhere !== undefined) {
        // Not this child's conversation: the task is not left running there.
        this.run.accepted(this.taskId ?? `message-${randomUUID()}`)
        this.interrupt()
        this.run.fail(`the A2A worker ${this.worker.url} ${elsewhere}`)
        return undefined
      }
      if (early) {
        // Answered at once: nothing more to read (closing the child still releases the connection).
        child.stream = undefined
        child.leave()
        this.run.accepted(this.taskId ?? `message-${randomUUID()}`)
        this.run.settle(early)
        return undefined
      }
      if (this.taskId === undefined) return this.unanswered('sent a first event that names no task')
      this.run.accepted(this.taskId)
      return stream
    } catch (error) {
      if (child.released) return this.unanswered(`was left before it answered: ${errorMessage(child.connection.signal.reason)}`)
      const reason = timedOut ? errorMessage(child.connection.signal.reason) : describeError(error)
      if (isUnreachable(error) || timedOut) {
        this.worker.markUnreachable()
        return this.unanswered(`did not answer at stage ${this.run.stage}: ${reason}; it is skipped for the next runs`)
      }
      // The provider's fetch saw the 401 (`TokenRefused`), whatever the SDK made of its body; a message naming 401 from elsewhere too.
      if (isTokenRefused(error) || /\b401\b/.test(reason)) return this.unanswered(this.refusedToken(reason))
      return this.unanswered(`refused the run at stage ${this.run.stage}: ${reason}`)
    } finally {
      clearTimeout(timer)
    }
  }

  private refusedToken(reason: string): string {
    const { tokenEnv } = this.spec
    const fix = tokenEnv === undefined
      ? 'no token was sent: set tokenEnv to the variable holding the token the worker was started with (dsh a2a serve --token-env NAME)'
      : `check that ${tokenEnv} (tokenEnv) holds the token the worker was started with (dsh a2a serve --token-env NAME)`
    return `refused the token (401 Unauthorized) at stage ${this.run.stage}; ${fix} (${reason})`
  }

  /** The run is published only to end `error` at once: a fan-out gets one result per delegation. */
  private unanswered(why: string): undefined {
    const child = this.child!
    // Nothing more to read: the stream that failed is not read again.
    child.stream = undefined
    child.leave()
    this.run.accepted(`unanswered-${randomUUID()}`)
    this.run.fail(`the A2A worker ${this.worker.url} ${why}`)
    return undefined
  }

  private message(): Message {
    const parts: Part[] = this.prompt.map((block) => ({ content: { $case: 'text', value: block.text }, metadata: undefined, filename: '', mediaType: 'text/plain' }))
    const metadata = A2A_LINEAGE.carry(this.lineage)
    const { conversation } = this
    // Once the worker is known to hold the context, it must still hold it: a worker that lost it says so, rather than starting an empty conversation (a dsh worker's CONTEXTS_EXTENSION).
    if (conversation?.opened) metadata.dsh.existingContext = true
    return {
      messageId: randomUUID(),
      contextId: conversation?.contextId ?? '',
      taskId: '',
      role: a2aSdk().Role.ROLE_USER,
      parts,
      metadata,
      extensions: [],
      referenceTaskIds: [],
    }
  }

  /**
   * A continuable child's task must be part of its context: a worker that put it in
   * another does not keep the conversation (the run fails, naming both). The first task
   * accepted in it tells later messages that the context exists.
   */
  private inContext(contextId: string): string | undefined {
    const { conversation } = this
    if (!conversation) return undefined
    if (contextId !== conversation.contextId) return `put ${this.taskId === undefined ? 'its answer' : `task ${this.taskId}`} in context ${JSON.stringify(contextId).slice(0, 140)}, not in context ${conversation.contextId} of this child: it does not keep the child's conversation`
    conversation.opened = true
    return undefined
  }

  /**
   * With a worker that promised keep-alives: a stream silent for `SILENT_PERIODS` of them
   * means the worker cannot be heard any more (a network partition, a stopped process),
   * which no socket error would report. The run ends `error` and the worker is skipped.
   */
  private watchSilence(): void {
    const period = this.keepAliveMs
    if (period === undefined) return
    const limit = period * SILENT_PERIODS
    const check = () => {
      // The parent's broker is deciding: the worker has nothing to send until it is answered.
      if (this.betweenLegs) {
        this.lastHeard = Date.now()
        return this.run.later(limit, check)
      }
      const silent = Date.now() - this.lastHeard
      if (silent < limit) return this.run.later(limit - silent, check)
      this.worker.markUnreachable()
      // Should it come back, the task is not left running there.
      this.interrupt()
      this.run.fail(
        `the A2A worker ${this.worker.url} went silent during task ${this.taskId}: nothing for ${silent} ms, more than ${SILENT_PERIODS} of its ${period} ms keep-alive periods (the link is down or the worker stopped); it is skipped for the next runs`,
        'lost',
      )
    }
    this.run.later(limit, check)
  }

  /** Read one leg of the task until it settles the run, or the task waits for input (`input-required`: the worker ends the leg's stream there). */
  private async drive(stream: TaskStream): Promise<'input-required' | undefined> {
    const { run } = this
    try {
      if (this.inputRequired !== undefined) return 'input-required'
      for await (const response of stream) {
        this.lastHeard = Date.now()
        const ended = this.fold(response)
        if (ended) {
          this.child!.leave()
          run.settle(ended)
          return undefined
        }
        if (this.inputRequired !== undefined) return 'input-required'
      }
      // An agent whose stream ends on a task snapshot waiting for input asks as much as a status update would.
      if (this.state === a2aSdk().TaskState.TASK_STATE_INPUT_REQUIRED && !run.stopping) {
        this.inputRequired = { message: this.lastStatusMessage }
        return 'input-required'
      }
      if (run.stopping === 'cancelled') run.settle(this.result('aborted', 'the run was cancelled'))
      else run.fail(`the A2A worker ${this.worker.url} closed the stream of task ${this.taskId} before it reached a final state`)
    } catch (error) {
      if (run.settled || this.child!.released) return undefined
      if (run.stopping === 'cancelled' && isAbortError(error)) {
        run.settle(this.result('aborted', 'the run was cancelled'))
        return undefined
      }
      if (isUnreachable(error)) this.worker.markUnreachable()
      run.fail(`the A2A worker ${this.worker.url} stopped answering during task ${this.taskId}: ${describeError(error)}${isUnreachable(error) ? '; it is skipped for the next runs' : ''}`)
    }
    return undefined
  }

  /**
   * The task waits for input. A dsh worker's approval request goes to the parent's broker,
   * and its decision back on the same task: the stream of that answer, its first event
   * read, is the next leg. Anything else (a question, a request asked twice, an answer the
   * worker refuses) ends the run, with the task cancelled there.
   */
  private async answerInput(): Promise<TaskStream | undefined> {
    const { run } = this
    const child = this.child!
    const taskId = this.taskId!
    const waiting = this.inputRequired?.message
    this.inputRequired = undefined
    const asked = readWorkerApproval(waiting)
    if (asked === undefined) {
      const question = textOfParts(waiting?.parts ?? [])
      return this.endWaiting(`asked its caller for input in task ${taskId}${question ? ` (${JSON.stringify(question.slice(0, 500))})` : ''}; a delegation has nobody to answer that, so the run ended and the task was cancelled there`)
    }
    if (this.answered.has(asked.id)) return this.endWaiting(`asked again for approval ${asked.id} in task ${taskId}, which was answered already; the task was cancelled there`)
    this.answered.add(asked.id)
    this.betweenLegs = true
    const decision = await this.decide(asked, taskId)
    // Stopped while the parent decided: the cancel (sent by interrupt) ends the task there.
    if (run.settled || run.stopping !== undefined || child.released) return undefined
    const stream = child.client!.sendMessageStream({ tenant: '', message: answerMessage(asked, decision, taskId, this.contextId ?? ''), configuration: undefined, metadata: undefined }, { signal: child.connection.signal })
    child.stream = stream
    try {
      const first = await stream.next()
      this.betweenLegs = false
      this.lastHeard = Date.now()
      if (first.done) return this.endWaiting(`closed the stream of the answer to approval ${asked.id} in task ${taskId} at once; the task was cancelled there`)
      const ended = this.fold(first.value)
      if (ended) {
        child.leave()
        run.settle(ended)
        return undefined
      }
      return stream
    } catch (error) {
      this.betweenLegs = false
      if (run.settled || child.released) return undefined
      if (isUnreachable(error)) this.worker.markUnreachable()
      return this.endWaiting(`refused the answer to approval ${asked.id} (${decision.decision}) in task ${taskId}: ${describeError(error)}; the task was cancelled there`)
    }
  }

  /** The parent's decision on `asked`: its broker's, or a rejection when there is nobody to ask. */
  private decide(asked: WorkerApproval, taskId: string): Promise<PermissionDecision> {
    const scope = this.approvals
    const broker = scope === undefined ? undefined : this.spec.approvals?.()
    if (scope === undefined || broker === undefined) {
      return Promise.resolve({ decision: 'reject', by: `the ${this.spec.provider} provider`, reason: 'nobody can be asked: the delegating process has no approval broker', source: 'default', at: Date.now() })
    }
    const childId = scope.childId ?? `${this.spec.provider}:${taskId}`
    return broker.request(approvalAsk(asked, childId, scope, AbortSignal.any([this.asks.signal, this.child!.connection.signal])))
  }

  /** The run ends `error` while the task waits for input it will not get: the task is cancelled there, so it does not wait for ever. */
  private endWaiting(why: string): undefined {
    this.interrupt()
    this.child!.leave()
    this.run.fail(`the A2A worker ${this.worker.url} ${why}`)
    return undefined
  }

  /** One stream event into the run's state; the result once the task reached a final state. */
  private fold(response: StreamResponse): SubagentResult | undefined {
    const payload = response.payload
    if (!payload) return undefined
    switch (payload.$case) {
      case 'message':
        // A reply without a task: the agent answered at once.
        this.contextId = payload.value.contextId
        this.statusText = textOfParts(payload.value.parts)
        return this.result('completed', undefined)
      case 'task': {
        const task = payload.value
        this.taskId = task.id
        this.contextId = task.contextId
        for (const artifact of task.artifacts) this.artifacts.set(artifact.artifactId, textOfParts(artifact.parts))
        // A snapshot (the first event of every message's stream) tells the state; it asks nothing by itself.
        return task.status ? this.onStatus(task.status.state, task.status.message, false) : undefined
      }
      case 'statusUpdate': {
        const { status, metadata } = payload.value
        this.progress.status(status?.message, metadata)
        if (this.approvals?.descendant !== undefined) this.progress.descendantsIn(metadata, this.approvals.descendant)
        this.usage = this.progress.usageIn(metadata) ?? this.usage
        return status ? this.onStatus(status.state, status.message, true) : undefined
      }
      case 'artifactUpdate': {
        const { artifact, append } = payload.value
        if (!artifact) return undefined
        const added = textOfParts(artifact.parts)
        const existing = this.artifacts.get(artifact.artifactId)
        const before = append ? (existing ?? '') : ''
        this.artifacts.set(artifact.artifactId, before + added)
        this.progress.artifact(added, !append && existing !== undefined)
        return undefined
      }
      default:
        return assertNever(payload, 'A2A stream response')
    }
  }

  private onStatus(state: TaskState, message: Message | undefined, update: boolean): SubagentResult | undefined {
    this.state = state
    if (message) {
      this.statusText = textOfParts(message.parts)
      this.lastStatusMessage = message
    }
    if (state === a2aSdk().TaskState.TASK_STATE_INPUT_REQUIRED && update) this.inputRequired = { message }
    const stopReason = stopReasonOfTaskState(state)
    if (stopReason === undefined) return undefined
    if (stopReason === 'completed') return this.result(stopReason, undefined)
    if (stopReason === 'aborted') return this.result(stopReason, 'the run was cancelled')
    const detail = this.statusText ? `: ${this.statusText}` : ''
    return this.result(stopReason, `the A2A worker ${this.worker.url} ended task ${this.taskId} ${taskStateName(state)}${detail}`)
  }

  result(stopReason: StopReason, diagnostic: string | undefined): SubagentResult {
    const result: SubagentResult = { output: this.output(), stopReason }
    if (diagnostic !== undefined) result.diagnostic = diagnostic
    if (this.usage) result.usage = this.usage
    return result
  }

  /** The `answer` artifact when the worker is dsh; else every artifact's text; else the last status message. */
  private output(): TextBlock[] {
    const answer = this.artifacts.get(ANSWER_ARTIFACT)
    const all = answer ?? [...this.artifacts.values()].join('')
    const chosen = all || this.statusText
    return chosen ? [text(chosen)] : []
  }

  /**
   * The protocol's task cancel, bounded: a worker that went silent must not hold the
   * request (and the process) open. A request pending at the parent's broker is withdrawn
   * at once; while the parent decided, no stream is read, so the cancel's own answer
   * settles the run.
   */
  interrupt(): void {
    this.asks.abort(new Error('the run is being stopped'))
    const client = this.child?.client
    const { taskId } = this
    if (!client || taskId === undefined) return
    client
      .cancelTask({ tenant: '', id: taskId, metadata: undefined }, { signal: AbortSignal.timeout(CANCEL_GRACE_MS) })
      .then((task) => {
        if (!this.betweenLegs || this.run.settled || this.run.stopping !== 'cancelled' || task.status?.state !== a2aSdk().TaskState.TASK_STATE_CANCELED) return
        this.child?.leave()
        this.run.settle(this.result('aborted', 'the run was cancelled'))
      })
      .catch(() => {
        // The worker is gone, silent or refused: the lifecycle's grace period settles the run aborted.
      })
  }

  /** The turn settled: a request still pending at the parent's broker is withdrawn. */
  detach(): void {
    this.asks.abort(new Error('the run ended'))
  }
}

function textOfParts(parts: readonly Part[]): string {
  return parts.map((part) => (part.content?.$case === 'text' ? part.content.value : '')).join('')
}

/** The cause chain, which for fetch holds the socket-level reason ("other side closed"). */
function describeError(error: unknown): string {
  const messages: string[] = []
  for (let current: unknown = error; current !== undefined && messages.length < 4; current = current instanceof Error ? current.cause : undefined) {
    const message = errorMessage(current)
    if (!messages.some((seen) => seen.includes(message))) messages.push(message)
  }
  return messages.join(': ')
}

const NETWORK_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'EHOSTUNREACH', 'ENETUNREACH', 'ETIMEDOUT', 'EPIPE', 'ENOTFOUND', 'UND_ERR_SOCKET', 'UND_ERR_CONNECT_TIMEOUT', 'UND_ERR_CLOSED'])

/** A failure to reach the worker at all (as opposed to an answer that refuses). */
function isUnreachable(error: unknown): boolean {
  for (let current: unknown = error, depth = 0; current instanceof Error && depth < 5; current = current.cause, depth++) {
    const code = (current as { code?: unknown }).code
    if (typeof code === 'string' && NETWORK_CODES.has(code)) return true
    if (current.message === 'fetch failed' || current.message === 'terminated') return true
  }
  return false
}

/** `traceparent` and `tracestate` as HTTP headers. */
function traceHeaders(trace: NonNullable<Lineage['trace']>): Record<string, string> {
  return trace.tracestate === undefined ? { traceparent: trace.traceparent } : { traceparent: trace.traceparent, tracestate: trace.tracestate }
}
