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
 * 4. cancel is the protocol's task cancel; closing the child aborts the HTTP stream.
 *
 * A worker that does not answer (refused connection, reset, a stream cut mid-answer) is
 * marked so the next runs skip it, and the run that hit it ends `error` with a
 * diagnostic naming the worker: it does not reject the start, so a fan-out over several
 * workers sees one settled result per delegation. The lifecycle (cancel grace, timeout)
 * is `@dsh/subagent`'s.
 */
import { randomUUID } from 'node:crypto'
import { Role, type Message, type Part, type StreamResponse, type TaskState } from '@a2a-js/sdk'
import { assertNever, errorMessage, isAbortError, type StopReason } from '@dsh/base'
import { text, type TextBlock } from '@dsh/llm'
import { A2A_LINEAGE, SubagentError, type Lineage, type RemoteTurn, type SubagentResult, type SubagentUsage, type TurnControl } from '@dsh/subagent'
import type { A2aRunSpec } from './config.js'
import { A2aProgressReader } from './progress.js'
import { stopReasonOfTaskState, taskStateName } from './task-state.js'
import { CANCEL_GRACE_MS, CONNECT_TIMEOUT_MS, type A2aChild, type A2aConversation } from './worker.js'

/** Where a run is; every diagnostic names it. */
export type A2aStage = 'agent card' | 'message/stream' | 'task'

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
  private readonly progress: A2aProgressReader
  private usage: SubagentUsage | undefined
  /** When the worker last sent anything on the task's stream. */
  private lastHeard = Date.now()
  /** The keep-alive period the worker's card promises, if it promises one. */
  private keepAliveMs: number | undefined

  constructor(
    private readonly spec: A2aRunSpec,
    private readonly prompt: TextBlock[],
    private readonly run: TurnControl,
    /** What the worker is told about the delegation, in `metadata.dsh`. */
    private readonly lineage: Lineage,
    /** A continuable child's context, which the task is part of; none for a one-shot run. */
    private readonly conversation?: A2aConversation,
  ) {
    this.progress = new A2aProgressReader(run, (reason) => spec.progressDropped?.(reason))
  }

  /** The worker this run holds. */
  private get worker() {
    return this.child!.worker
  }

  async deliver(child: A2aChild): Promise<void> {
    this.child = child
    const stream = await this.open(child)
    if (stream === undefined) return
    this.run.moveTo('task')
    this.watchSilence()
    await this.drive(stream)
  }

  /** Up to the task's first event: the stream to read on, or `undefined` when the run has ended already. */
  private async open(child: A2aChild): Promise<AsyncGenerator<StreamResponse, void, undefined> | undefined> {
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
      if (/\b401\b/.test(reason)) return this.unanswered(this.refusedToken(reason))
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
      role: Role.ROLE_USER,
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

  private async drive(stream: AsyncGenerator<StreamResponse, void, undefined>): Promise<void> {
    const { run } = this
    try {
      for await (const response of stream) {
        this.lastHeard = Date.now()
        const ended = this.fold(response)
        if (ended) {
          this.child!.leave()
          return run.settle(ended)
        }
      }
      if (run.stopping === 'cancelled') return run.settle(this.result('aborted', 'the run was cancelled'))
      run.fail(`the A2A worker ${this.worker.url} closed the stream of task ${this.taskId} before it reached a final state`)
    } catch (error) {
      if (run.settled || this.child!.released) return
      if (run.stopping === 'cancelled' && isAbortError(error)) return run.settle(this.result('aborted', 'the run was cancelled'))
      if (isUnreachable(error)) this.worker.markUnreachable()
      run.fail(`the A2A worker ${this.worker.url} stopped answering during task ${this.taskId}: ${describeError(error)}${isUnreachable(error) ? '; it is skipped for the next runs' : ''}`)
    }
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
        return task.status ? this.onStatus(task.status.state, task.status.message) : undefined
      }
      case 'statusUpdate': {
        const { status, metadata } = payload.value
        this.progress.status(status?.message, metadata)
        this.usage = this.progress.usageIn(metadata) ?? this.usage
        return status ? this.onStatus(status.state, status.message) : undefined
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

  private onStatus(state: TaskState, message: Message | undefined): SubagentResult | undefined {
    if (message) this.statusText = textOfParts(message.parts)
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

  /** The protocol's task cancel, bounded: a worker that went silent must not hold the request (and the process) open. */
  interrupt(): void {
    const client = this.child?.client
    const { taskId } = this
    if (!client || taskId === undefined) return
    client.cancelTask({ tenant: '', id: taskId, metadata: undefined }, { signal: AbortSignal.timeout(CANCEL_GRACE_MS) }).catch(() => {
      // The worker is gone, silent or refused: the lifecycle's grace period settles the run aborted.
    })
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
