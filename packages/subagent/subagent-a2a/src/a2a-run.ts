/**
 * The A2A wire of one delegation, on `@dsh/subagent`'s remote run core (no local process:
 * the child is a task on a worker elsewhere). What is particular to A2A:
 *
 * 1. choose the least busy worker that answers; read its agent card (once per worker);
 * 2. send the prompt as a streamed message with the lineage in `metadata.dsh`; the first
 *    event names the task, whose id is the child's remote id;
 * 3. publication: status and artifact updates are folded until a final state settles it;
 *    a worker whose card promises keep-alives and then sends nothing for
 *    `SILENT_PERIODS` of them has gone silent (link down, process stopped): the run ends
 *    `error` and the worker is marked;
 * 4. cancel is the protocol's task cancel; release aborts the HTTP stream.
 *
 * A worker that does not answer (refused connection, reset, a stream cut mid-answer) is
 * marked so the next runs skip it, and the run that hit it ends `error` with a
 * diagnostic naming the worker: it does not reject the start, so a fan-out over several
 * workers sees one settled result per delegation.
 */
import { randomUUID } from 'node:crypto'
import { Role, type AgentCard, type Message, type Part, type StreamResponse, type TaskState } from '@a2a-js/sdk'
import type { Client } from '@a2a-js/sdk/client'
import { assertNever, errorMessage, isAbortError, isRecord, type StopReason } from '@dsh/base'
import { text, type TextBlock } from '@dsh/llm'
import { A2A_LINEAGE, lineageOf, startRemoteRun, SubagentError, type RemoteRunControl, type RemoteSubagentRun, type RemoteWire, type SubagentRequest, type SubagentResult, type SubagentUsage } from '@dsh/subagent'
import type { A2aRunSpec } from './config.js'
import { A2aProgressReader } from './progress.js'
import { stopReasonOfTaskState, taskStateName } from './task-state.js'
import type { Worker, WorkerPool } from './worker-pool.js'

/** Where a run is; every diagnostic names it. */
export type A2aStage = 'agent card' | 'message/stream' | 'task'

/** How long a worker has to send the agent card and the task's first event. */
export const CONNECT_TIMEOUT_MS = 10_000
/** After a task cancel, how long the worker has to report the task canceled. */
export const CANCEL_GRACE_MS = 5_000
/** The artifact `dsh a2a serve` puts the final answer in (streamed text goes elsewhere). */
export const ANSWER_ARTIFACT = 'answer'
/** The card extension by which a worker promises keep-alive status updates every `params.intervalMs`. */
export const KEEPALIVE_EXTENSION = 'urn:dsh:a2a:keepalive:v1'
/** A worker that promised keep-alives and sent nothing for this many of their periods has gone silent. */
export const SILENT_PERIODS = 5

export function startA2aRun(spec: A2aRunSpec, pool: WorkerPool, request: SubagentRequest): Promise<RemoteSubagentRun> {
  if (request.agentOptions?.model !== undefined) {
    throw new SubagentError(
      'INVALID_REQUEST',
      `the "${spec.provider}" subagent provider cannot choose the model of an A2A worker (asked for "${request.agentOptions.model}"); choose it where the worker runs (dsh a2a serve --model SPEC) and drop agentOptions.model`,
    )
  }
  return startRemoteRun(
    request,
    {
      provider: spec.provider,
      childName: 'the A2A worker',
      initialStage: 'agent card' satisfies A2aStage,
      // The wire bounds the connection itself (CONNECT_TIMEOUT_MS) and ends the run on expiry;
      // this is the backstop for a start that never settles at all.
      startupTimeoutMs: CONNECT_TIMEOUT_MS * 3,
      startupTimeoutKey: 'the connect timeout',
      timeoutMs: spec.timeoutMs,
      timeoutIncludesStartup: true,
      cancelGraceMs: CANCEL_GRACE_MS,
      cancelGraceKey: 'the cancel grace period',
    },
    (run) => new A2aWire(spec, pool, run),
  )
}

class A2aWire implements RemoteWire {
  private readonly worker: Worker
  private client: Client | undefined
  private stream: AsyncGenerator<StreamResponse, void, undefined> | undefined
  private readonly connection = new AbortController()
  private taskId: string | undefined
  /** Artifact text by artifact id, in the order they appeared. */
  private readonly artifacts = new Map<string, string>()
  private statusText = ''
  private readonly progress: A2aProgressReader
  private usage: SubagentUsage | undefined
  private released = false
  /** Whether this run still counts toward its worker's load. */
  private holdsWorker = true
  /** When the worker last sent anything on the task's stream. */
  private lastHeard = Date.now()
  /** The keep-alive period the worker's card promises, if it promises one. */
  private keepAliveMs: number | undefined
  readonly interrupt = { name: 'the task cancel', send: () => this.sendCancel() }

  constructor(
    private readonly spec: A2aRunSpec,
    private readonly pool: WorkerPool,
    private readonly run: RemoteRunControl,
  ) {
    this.worker = pool.acquire()
    this.progress = new A2aProgressReader(run, (reason) => spec.progressDropped?.(reason))
  }

  async open(): Promise<string> {
    // Only this timer means the worker did not answer; an abort by close() (the delegation
    // was cancelled or released while starting) says nothing about the worker.
    let timedOut = false
    const timer = setTimeout(() => {
      timedOut = true
      this.connection.abort(new SubagentError('START_FAILED', `no answer within ${CONNECT_TIMEOUT_MS} ms`))
    }, CONNECT_TIMEOUT_MS)
    try {
      this.client = await raceAbort(this.worker.connect(), this.connection.signal)
      this.keepAliveMs = promisedKeepAlive(await this.client.getAgentCard())
      this.run.moveTo('message/stream')
      this.stream = this.client.sendMessageStream(
        { tenant: '', message: this.message(), configuration: undefined, metadata: undefined },
        { signal: this.connection.signal },
      )
      const first = await this.stream.next()
      if (first.done) return this.unanswered('closed the stream before naming a task')
      this.lastHeard = Date.now()
      this.worker.markAnswering()
      const early = this.fold(first.value)
      if (early) {
        // Answered at once: nothing more to read (close() still releases the connection).
        this.stream = undefined
        this.leaveWorker()
        this.run.settle(early)
        return this.taskId ?? `message-${randomUUID()}`
      }
      if (this.taskId === undefined) return this.unanswered('sent a first event that names no task')
      return this.taskId
    } catch (error) {
      if (this.released) return this.unanswered(`was left before it answered: ${errorMessage(this.connection.signal.reason)}`)
      const reason = timedOut ? errorMessage(this.connection.signal.reason) : describeError(error)
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
  private unanswered(why: string): string {
    // Nothing more to read: `begin` must not start reading a stream that already failed.
    this.stream = undefined
    this.leaveWorker()
    this.run.fail(`the A2A worker ${this.worker.url} ${why}`)
    return `unanswered-${randomUUID()}`
  }

  private message(): Message {
    const parts: Part[] = this.run.request.prompt.map((block) => ({ content: { $case: 'text', value: block.text }, metadata: undefined, filename: '', mediaType: 'text/plain' }))
    return {
      messageId: randomUUID(),
      contextId: '',
      taskId: '',
      role: Role.ROLE_USER,
      parts,
      metadata: A2A_LINEAGE.carry(lineageOf(this.run.request, this.spec.provider, this.run.request.maxDepth)),
      extensions: [],
      referenceTaskIds: [],
    }
  }

  begin(): void {
    if (!this.stream) return
    this.run.moveTo('task')
    this.watchSilence()
    void this.drive(this.stream)
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
      this.sendCancel()
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
          this.leaveWorker()
          return run.settle(ended)
        }
      }
      if (run.stopping === 'cancelled') return run.settle(this.result('aborted', 'the run was cancelled'))
      run.fail(`the A2A worker ${this.worker.url} closed the stream of task ${this.taskId} before it reached a final state`)
    } catch (error) {
      if (run.settled || this.released) return
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
        this.statusText = textOfParts(payload.value.parts)
        return this.result('completed', undefined)
      case 'task': {
        const task = payload.value
        this.taskId = task.id
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
        const before = append ? (this.artifacts.get(artifact.artifactId) ?? '') : ''
        this.artifacts.set(artifact.artifactId, before + added)
        this.progress.artifact(artifact.artifactId, added)
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

  startFailed(message: string): SubagentError {
    return new SubagentError('START_FAILED', `the A2A worker ${this.worker.url} could not start the run at stage ${this.run.stage}: ${message}`)
  }

  private sendCancel(): void {
    const { client, taskId } = this
    if (!client || taskId === undefined) return
    // Bounded: a worker that went silent must not hold the request (and the process) open.
    client.cancelTask({ tenant: '', id: taskId, metadata: undefined }, { signal: AbortSignal.timeout(CANCEL_GRACE_MS) }).catch(() => {
      // The worker is gone, silent or refused: the core's grace period settles the run aborted.
    })
  }

  /** The task reached its end on the worker (or never began): the worker is that much less busy, whenever the run is disposed. */
  private leaveWorker(): void {
    if (!this.holdsWorker) return
    this.holdsWorker = false
    this.pool.release(this.worker)
  }

  async close(): Promise<void> {
    if (this.released) return
    this.released = true
    this.leaveWorker()
    this.connection.abort(new SubagentError('ABORTED', 'the run was released'))
    await this.stream?.return(undefined).catch(() => {
      // The stream was aborted just above; its rejection only repeats that.
    })
  }
}

/** The keep-alive period a card promises (`KEEPALIVE_EXTENSION`), when it is a sane one. */
function promisedKeepAlive(card: AgentCard): number | undefined {
  const extension = card.capabilities?.extensions.find((candidate) => candidate.uri === KEEPALIVE_EXTENSION)
  const intervalMs: unknown = isRecord(extension?.params) ? extension.params.intervalMs : undefined
  return typeof intervalMs === 'number' && Number.isInteger(intervalMs) && intervalMs >= 100 && intervalMs <= 300_000 ? intervalMs : undefined
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

function raceAbort<T>(promise: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(signal.reason)
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason)
    signal.addEventListener('abort', onAbort, { once: true })
    promise.then(resolve, reject).finally(() => signal.removeEventListener('abort', onAbort))
  })
}
