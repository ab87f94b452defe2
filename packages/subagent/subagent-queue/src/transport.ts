/**
 * A delegation as a BullMQ job: the provider's connection and turn in one file, since a
 * queue run has no process and one turn. The job's id comes from the parent's session and
 * tool call, so a call that is retried or resumed finds its job (waiting, running or
 * finished) instead of enqueueing a second one.
 *
 * 1. connect: the provider's shared queue connections (`client.ts`), open;
 * 2. deliver: listen for the job's events, add the job (a no-op when it exists), then look
 *    at its state: a job that finished before anyone listened is collected at once;
 * 3. progress reports become the run's progress; the return value is the result; a failed
 *    attempt with attempts left is a status line, the last one ends the run `error`
 *    naming the worker (when BullMQ's own reason names none, as for a job that stalled
 *    out, every worker that held it, from the lines they wrote on the job's log);
 * 4. cancel removes a job nobody took, and tells the worker holding a taken one on the
 *    queue's cancel channel; the worker's run ends `aborted` and so does this one.
 */
import { createHash, randomUUID } from 'node:crypto'
import type { Job, Queue } from 'bullmq'
import { errorMessage, type StopReason } from '@dsh/base'
import { text, type TextBlock } from '@dsh/llm'
import { SubagentError, type Lineage, type ReportedDescendant, type RemoteChild, type RemoteConnection, type RemoteTransport, type RemoteTurn, type SubagentResult, type SubagentUsage, type TurnControl } from '@dsh/subagent'
import { cancelChannel, type QueueClient } from './client.js'
import type { QueueRunSpec } from './config.js'
import { jobSignature } from './signing.js'
import { holdersOf, JOB_NAME, jobPayload, readJobDescendants, readJobProgress, readJobResult, type JobHelper, type JobPayload, type JobResult } from './wire.js'

/** After a cancel, how long the worker has to confirm it (its run ends, the job fails `aborted`). */
export const CANCEL_GRACE_MS = 5_000
/** The failure text a worker gives a job it stopped because it was cancelled. */
export const ABORTED_PREFIX = 'aborted: '
/** Most lines a job's log keeps (one per worker that took it: attempts times stalls, far fewer). */
const KEEP_LOG_LINES = 100

const SAFE_ID = /^[A-Za-z0-9._-]+$/

/**
 * The job id of a delegation: the parent session, the tool call (readable where it can be,
 * a hash where it cannot) and a hash of the prompt, so the same call made again (a retry,
 * a resume) finds its job, while a later call that happens to reuse a call id (some
 * servers number calls per response) with another prompt is a job of its own. Fresh
 * without a tool call.
 */
export function jobIdOf(lineage: Pick<Lineage, 'parentSession' | 'toolCallId'>, prompt: string): string {
  const { parentSession, toolCallId } = lineage
  if (toolCallId === undefined) return `${parentSession}.${randomUUID()}`
  const promptHash = createHash('sha256').update(prompt).digest('hex').slice(0, 12)
  const call = SAFE_ID.test(toolCallId) && toolCallId.length <= 120 ? toolCallId : createHash('sha256').update(toolCallId).digest('hex').slice(0, 32)
  return `${parentSession}.${call}.${promptHash}`
}

/** One run's hold on the queue. */
class QueueChild implements RemoteChild {
  released = false
  private readonly cleanups: Array<() => void> = []

  constructor(readonly client: QueueClient) {}

  onClose(cleanup: () => void): void {
    this.cleanups.push(cleanup)
  }

  async running(): Promise<boolean> {
    return !this.released
  }

  async close(): Promise<void> {
    if (this.released) return
    this.released = true
    for (const cleanup of this.cleanups.splice(0)) cleanup()
  }
}

export class QueueTransport implements RemoteTransport<QueueChild> {
  readonly childName = 'the queue worker'
  readonly interruptName = 'the queue cancel'
  readonly cancelGraceMs = CANCEL_GRACE_MS
  readonly cancelGraceKey = 'the cancel grace period'
  readonly startupTimeoutMs = 30_000
  readonly startupTimeoutKey = 'the Redis connect timeout'
  readonly timeoutIncludesStartup = true
  readonly initialStage = 'redis'
  readonly turnStage = 'enqueue'
  readonly conversationName = 'a queue job'

  constructor(
    private readonly spec: QueueRunSpec,
    private readonly client: QueueClient,
    private readonly lineage: Lineage,
    private readonly helper: JobHelper | undefined,
    /** Told of each agent below the job a worker names in its progress, already checked. */
    private readonly descendant?: (reported: ReportedDescendant) => void,
  ) {}

  get provider(): string {
    return this.spec.provider
  }

  get timeoutMs(): number | undefined {
    return this.spec.timeoutMs
  }

  storedAt(): string {
    return `a dsh worker of queue "${this.spec.queue}" (Redis ${this.spec.redisShown})`
  }

  connect(): RemoteConnection<QueueChild> {
    const child = new QueueChild(this.client)
    return { child, opened: this.client.open().then(() => undefined) }
  }

  openTurn(message: TextBlock[], control: TurnControl): RemoteTurn<QueueChild> {
    return new QueueTurn(this.spec, message.map((block) => block.text).join('\n'), control, this.lineage, this.helper, this.descendant)
  }

  startFailed(message: string, stage: string): SubagentError {
    return new SubagentError('START_FAILED', `the queue "${this.spec.queue}" could not take the delegation at stage ${stage}: ${message}`)
  }
}

class QueueTurn implements RemoteTurn<QueueChild> {
  private readonly jobId: string
  private job: Job | undefined
  private queue: Queue | undefined
  private usage: SubagentUsage | undefined
  private output = ''
  private readonly failures: string[] = []

  constructor(
    private readonly spec: QueueRunSpec,
    private readonly prompt: string,
    private readonly run: TurnControl,
    private readonly lineage: Lineage,
    private readonly helper: JobHelper | undefined,
    private readonly descendant: ((reported: ReportedDescendant) => void) | undefined,
  ) {
    this.jobId = jobIdOf(lineage, prompt)
  }

  async deliver(child: QueueChild): Promise<void> {
    const { queue } = await child.client.open()
    this.queue = queue
    child.onClose(
      child.client.listen(this.jobId, {
        progress: (data) => this.onProgress(data),
        completed: (value) => this.onCompleted(value),
        failed: (reason) => void this.onFailed(reason),
      }),
    )
    const { spec } = this
    const keep = { age: Math.ceil(spec.keepFinishedMs / 1000) }
    const data: JobPayload = jobPayload(this.prompt, this.lineage, this.helper)
    // Signed for this queue and this job id: a copy moved to another queue or id fails the check.
    if (spec.key !== undefined) data.sig = jobSignature(spec.key, spec.queue, this.jobId, data as unknown as Record<string, unknown>)
    try {
      this.job = await queue.add(JOB_NAME, data, {
        jobId: this.jobId,
        attempts: spec.attempts,
        backoff: { type: 'exponential', delay: 500 },
        removeOnComplete: keep,
        removeOnFail: keep,
        keepLogs: KEEP_LOG_LINES,
      })
    } catch (error) {
      throw new SubagentError('START_FAILED', `Redis at ${spec.redisShown} did not take the job: ${errorMessage(error)}`, { cause: error })
    }
    this.run.accepted(this.jobId)
    // Finished before this run listened (a resumed parent, a fast worker): collect it now.
    const state = await this.job.getState().catch(() => 'unknown')
    if (state === 'completed' || state === 'failed') {
      const fresh = await (await import('bullmq')).Job.fromId(queue, this.jobId)
      if (state === 'completed') this.onCompleted(fresh?.returnvalue)
      else void this.finalFailure(fresh?.failedReason ?? 'the job failed')
    }
  }

  private onProgress(data: unknown): void {
    if (this.run.settled) return
    // Read whether or not anybody listens to progress: the parent's hooks hear them.
    if (this.descendant !== undefined) for (const reported of readJobDescendants(data, (reason) => this.spec.progressDropped?.(reason))) this.descendant(reported)
    if (!this.run.reporting) return
    for (const update of readJobProgress(data)) this.run.report(update)
  }

  private onCompleted(value: unknown): void {
    if (this.run.settled) return
    let result: JobResult
    try {
      result = readJobResult(value)
    } catch (error) {
      return this.run.fail(`the queue job ${this.jobId} returned a result this parent cannot read: ${errorMessage(error)}`)
    }
    this.output = result.output
    this.usage = result.usage
    this.run.settle(this.result(result.stopReason, result.diagnostic))
  }

  private async onFailed(reason: string): Promise<void> {
    if (this.run.settled) return
    this.failures.push(reason)
    // A failed attempt with attempts left goes back to the queue: the run goes on.
    const state = this.job ? await this.job.getState().catch(() => 'unknown') : 'unknown'
    if (state === 'failed' || reason.startsWith(ABORTED_PREFIX) || this.run.stopping === 'cancelled') return this.finalFailure(reason)
    if (this.run.reporting) this.run.report({ kind: 'status', text: `attempt ${this.failures.length} failed (${reason.slice(0, 160)}); another worker retries it` })
  }

  /** Never rejects: what cannot be read of the job's log is left out of the diagnostic. */
  private async finalFailure(reason: string): Promise<void> {
    if (this.run.settled) return
    if (reason.startsWith(ABORTED_PREFIX) || this.run.stopping === 'cancelled') return this.run.settle(this.result('aborted', 'the run was cancelled'))
    const tries = this.failures.length > 1 ? ` (after ${this.failures.length} attempts: ${this.failures.map((why) => why.slice(0, 200)).join('; ')})` : ''
    const held = await this.heldBy(reason)
    if (this.run.settled) return
    this.run.settle(this.result('error', `the queue job ${this.jobId} failed: ${reason.slice(0, 1_000)}${tries}${held}`))
  }

  /**
   * The workers that held the job, from its log, when `reason` names none of them: a
   * worker's own failure names it (`[host:pid] …`), but a job whose workers died is failed
   * by BullMQ, whose reason ("job stalled more than allowable limit") names nobody.
   */
  private async heldBy(reason: string): Promise<string> {
    let holders: Array<{ worker: string; attempt: number }>
    try {
      holders = holdersOf((await this.queue!.getJobLogs(this.jobId, 0, KEEP_LOG_LINES - 1)).logs)
    } catch {
      return ''
    }
    if (holders.length === 0 || holders.some(({ worker }) => reason.includes(worker))) return ''
    const list = holders.map(({ worker, attempt }) => `${worker} (try ${attempt})`).join(', ')
    const why = /stalled/.test(reason) ? ', each of which stopped renewing its lock before it finished (the worker died or lost Redis)' : ''
    return `; it was held by ${list}${why}`
  }

  result(stopReason: StopReason, diagnostic: string | undefined): SubagentResult {
    const result: SubagentResult = { output: this.output ? [text(this.output)] : [], stopReason }
    if (diagnostic !== undefined) result.diagnostic = diagnostic
    if (this.usage) result.usage = this.usage
    return result
  }

  interrupt(child: QueueChild): void {
    void (async () => {
      const { queue, publisher } = await child.client.open()
      const job = await (await import('bullmq')).Job.fromId(queue, this.jobId)
      const state = await job?.getState()
      // Nobody took it yet: it is simply taken off the queue.
      if (job && (state === 'waiting' || state === 'delayed' || state === 'prioritized')) {
        await job.remove()
        return this.run.settle(this.result('aborted', 'the run was cancelled before a worker took it'))
      }
      await publisher.publish(cancelChannel(this.spec.queue), this.jobId)
    })().catch(() => {
      // Redis is away: the lifecycle's grace period settles the run aborted.
    })
  }
}
