/**
 * `dsh worker`'s engine: takes delegation jobs from one or more BullMQ queues, at most
 * `concurrency` at a time, and runs each as one dsh session (origin `queue`, the lineage
 * the job carries in its header), until the agent is quiet. A job's helper (an agent
 * definition's persona, tool lists and model) makes its agent; a helper this worker cannot
 * run as asked (a model it cannot resolve, a tool it lacks) fails the job rather than run
 * on the worker's own. While it runs, its progress is reported on the job (coalesced); its
 * answer is the job's return value.
 *
 * Durability is BullMQ's: a job is locked by the worker running it and the lock renewed
 * while it runs; a worker that dies stops renewing, another worker's stalled-job check
 * puts the job back, and the next worker runs it again (the header's attempt number says
 * which try a session was; the job's log says which worker took each try, so a job that
 * stalls out is reported naming them). A job that is not ours (another version, missing
 * fields, a huge prompt) fails at once without retries, with the reason; the worker goes on.
 * With a queue key, so does a job that is not signed with it (`@dsh/subagent-queue`'s
 * `signing.ts`), before its data is read: its lineage (rules, budget) is only believed
 * when the parent that holds the key wrote it.
 *
 * A queue cannot ask up the tree, so what no approval rule decides is decided by this
 * worker's broker alone, and never more permissively than the job's lineage allows: the
 * broker bounds this worker's default (`approvals.default`) by the one the lineage carried
 * (`approvalDefault`, its root's and every ancestor's, the strictest), and a lineage without
 * one allows only what its rules allow; a job whose lineage overrules an allowing default
 * here says so in one line on the log, naming what to change.
 *
 * Cancels arrive on the queue's cancel channel (`cancelChannel`): the job's run is aborted
 * (its turn ends `aborted`, its tasks and children stopped) and the job fails `aborted:`
 * without retries. `close` stops taking jobs, cancels the running ones when asked to
 * (else lets them finish), and closes every connection.
 */
import { hostname } from 'node:os'
import { UnrecoverableError, Worker, type Job } from 'bullmq'
import type { Context } from 'cordis'
import type { Redis } from 'ioredis'
import { delegationName } from '@dsh/approvals'
import { errorMessage, expandToolEntries, isToolPattern, printable } from '@dsh/base'
import { admitDelegation, QUEUE_LINEAGE, serveDelegation, trackDescendants, type OpenDelegationOptions, type ReportedDescendant, type SubagentProgress, type SubagentUsage } from '@dsh/subagent'
import { ABORTED_PREFIX, cancelChannel, jobSignatureProblem, pingRedis, readJobPayload, redisClient, takenLogLine, WIRE_VERSION, type JobHelper, type JobProgress, type JobResult, type QueueKey } from '@dsh/subagent-queue'

interface QueueWorkerOptions {
  /** The queues to take jobs from. */
  queues: readonly string[]
  redisUrl: string
  /** Jobs run at once, per queue. */
  concurrency: number
  /** The depth bound this worker applies (the tighter of it and the job's). */
  maxDepth: number
  /** The cwd of every job's session. */
  cwd: string
  /**
   * How long a job's lock lasts without renewal: a worker that died is noticed after about
   * this long, and its job handed to another. BullMQ's default is 30 s.
   */
  lockMs?: number
  /** How often progress is reported on a job at most. */
  progressIntervalMs?: number
  /**
   * The queue's signing key: with one, only jobs signed with it run (an unsigned or forged
   * job fails before anything runs); without, every job is taken as written, trusting
   * whoever can write to the Redis.
   */
  key?: QueueKey
  /** Told as each job starts and ends (`dsh worker` logs a line for each); observe-only: what it throws is ignored. */
  onJob?: (event: QueueJobEvent) => void
}

/**
 * A job as `onJob` hears of it. `helper` and `label` are as the job's data says them (the
 * helper's name, the delegation's description), unchecked: for a log line, not for trust.
 * `outcome`: the turn's stop reason (`completed`, `error`, …), `aborted` (cancelled), or
 * `failed` with the reason in `detail` (refused, or the run could not go on).
 */
export type QueueJobEvent =
  | ({ phase: 'start' } & QueueJobAbout)
  | ({ phase: 'end'; outcome: string; detail?: string; durationMs: number; usage?: SubagentUsage } & QueueJobAbout)

interface QueueJobAbout {
  id: string
  queue: string
  attempt: number
  helper?: string
  label?: string
}

/** The name this worker gives itself in failures and results: `host:pid`. */
export const WORKER_NAME = `${hostname()}:${process.pid}`

export interface QueueWorker {
  /** Jobs running now. */
  readonly running: number
  /** Stop taking jobs; with `cancel`, abort the running ones, else wait for them. */
  close(options?: { cancel?: boolean }): Promise<void>
}

export async function serveQueue(ctx: Context, options: QueueWorkerOptions): Promise<QueueWorker> {
  // Once serving, the connections wait out a Redis that went away; at the start, one that
  // is not there (or refuses this worker) is a failure, not a wait.
  await pingRedis(options.redisUrl)
  const log = ctx.logger('queue-worker')
  const active = new Map<string, AbortController>()
  const lockMs = options.lockMs ?? 30_000
  const workers = options.queues.map(
    (name) =>
      new Worker(name, (job, _token, signal) => (options.onJob === undefined ? runJob(job, signal) : runJobTold(job, signal, options.onJob)), {
        connection: redisClient(options.redisUrl, true),
        concurrency: options.concurrency,
        lockDuration: lockMs,
        stalledInterval: Math.max(500, Math.floor(lockMs / 2)),
        // A job whose worker died goes back twice before it fails "stalled".
        maxStalledCount: 2,
        autorun: false,
      }),
  )
  for (const worker of workers) worker.on('error', (error) => log.warn('queue %s: %s', worker.name, errorMessage(error)))

  const subscriber: Redis = redisClient(options.redisUrl, true)
  subscriber.on('error', () => {
    // Reconnects on its own; a cancel sent meanwhile ends the job at its timeout instead.
  })
  await subscriber.subscribe(...options.queues.map(cancelChannel))
  subscriber.on('message', (_channel: string, jobId: string) => {
    const controller = active.get(jobId)
    if (controller) controller.abort(new Error('cancelled by the delegating parent'))
  })

  /** `runJob`, with `onJob` told of its start and its end (its outcome, how long it took, what it used). */
  async function runJobTold(job: Job, lockLost: AbortSignal | undefined, onJob: (event: QueueJobEvent) => void): Promise<JobResult> {
    const data = (typeof job.data === 'object' && job.data !== null ? job.data : {}) as { helper?: { name?: unknown }; lineage?: { label?: unknown } }
    const about: QueueJobAbout = { id: job.id!, queue: job.queueName, attempt: Math.max(1, job.attemptsStarted) }
    if (typeof data.helper?.name === 'string') about.helper = data.helper.name
    if (typeof data.lineage?.label === 'string') about.label = data.lineage.label
    const tell = (event: QueueJobEvent) => {
      try {
        onJob(event)
      } catch (error) {
        log.warn('onJob failed: %s', errorMessage(error))
      }
    }
    const started = Date.now()
    tell({ phase: 'start', ...about })
    try {
      const result = await runJob(job, lockLost)
      tell({ phase: 'end', ...about, outcome: result.stopReason, ...(result.diagnostic !== undefined && { detail: result.diagnostic }), durationMs: Date.now() - started, ...(result.usage !== undefined && { usage: result.usage }) })
      return result
    } catch (error) {
      const message = errorMessage(error)
      tell({ phase: 'end', ...about, outcome: message.startsWith(ABORTED_PREFIX) ? 'aborted' : 'failed', detail: message, durationMs: Date.now() - started })
      throw error
    }
  }

  async function runJob(job: Job, lockLost: AbortSignal | undefined): Promise<JobResult> {
    const attempt = Math.max(1, job.attemptsStarted)
    // Said before anything runs: if this worker dies, the job's log is what names it.
    // Not awaited: the line goes out ahead of every later command on the connection.
    job.log(takenLogLine(WORKER_NAME, attempt)).catch(() => {
      // Redis is away: the job's own commands fail next, with a reason of their own.
    })
    if (options.key !== undefined) {
      const problem = jobSignatureProblem(options.key, job.queueName, job.id!, job.data)
      if (problem !== undefined) {
        log.warn('refused job %s of queue %s: %s', printable(job.id!.slice(0, 200)), job.queueName, problem)
        // Retrying would not sign it: the job fails at once, and its parent reads why.
        throw new UnrecoverableError(`[${WORKER_NAME}] ${problem}`)
      }
    }
    let payload
    try {
      payload = readJobPayload(job.data)
    } catch (error) {
      // Not ours, or broken: no other worker would do better.
      throw new UnrecoverableError(`[${WORKER_NAME}] ${errorMessage(error)}`)
    }
    let admitted
    try {
      admitted = admitDelegation({ maxDepth: options.maxDepth, subject: 'this job would run', own: "this worker's" }, QUEUE_LINEAGE.decode(payload.lineage, log))
      if (payload.helper !== undefined) await refuseUnrunnableHelper(payload.helper)
    } catch (error) {
      throw new UnrecoverableError(`[${WORKER_NAME}] ${errorMessage(error)}`)
    }
    const cancel = new AbortController()
    active.set(job.id!, cancel)
    const onLockLost = () => cancel.abort(new Error('the job was taken away from this worker'))
    lockLost?.addEventListener('abort', onLockLost, { once: true })
    const reporter = new ProgressReporter(job, options.progressIntervalMs ?? 250)
    try {
      // The one served line (`@dsh/subagent`'s served.ts): the job's agent, bounded by the
      // budget its parent handed it, its progress reported on the job, and what its whole
      // subtree used (its agent's calls and every child run below it), so the parent counts
      // it against its budget.
      const run = await serveDelegation(ctx, admitted, {
        ...helperOptions(payload.helper),
        meta: { origin: 'queue', cwd: options.cwd, attempt, ...helperMeta(payload.helper) },
        provider: 'queue',
        prompt: payload.prompt,
        signal: cancel.signal,
        opened: (agent) => {
          sayIfLineageBoundsDefault(job, agent)
          // The agents below the job, named to the parent in its progress so its hooks hear the whole tree.
          return trackDescendants(ctx, agent.id, delegationName, (descendant) => reporter.addDescendant(descendant))
        },
        progress: { report: (update) => reporter.add(update) },
        onUsage: (usage) => reporter.add({ kind: 'usage', usage }),
        disposeFailed: (error) => log.warn('disposing the agent of job %s failed: %s', job.id, errorMessage(error)),
      })
      await reporter.flush()
      if (run.cancelled) throw new UnrecoverableError(`${ABORTED_PREFIX}${errorMessage(cancel.signal.reason)} (on ${WORKER_NAME})`)
      const { reason, error } = run.last
      const result: JobResult = { v: WIRE_VERSION, output: run.answer, stopReason: reason, session: run.agentId, worker: WORKER_NAME }
      // A turn's error that already names its reason (a budget's `budget: …`) is said as it is.
      if (reason !== 'completed') result.diagnostic = error?.startsWith(`${reason}:`) ? error : `the turn ended ${reason}${error ? `: ${error}` : ''}`
      if (run.usageReported) result.usage = run.usage
      return result
    } catch (error) {
      // Every failure names this worker, so a job tried by several says who failed how.
      if (error instanceof UnrecoverableError) throw error
      throw new Error(`[${WORKER_NAME}] ${errorMessage(error)}`, { cause: error })
    } finally {
      reporter.stop()
      lockLost?.removeEventListener('abort', onLockLost)
      active.delete(job.id!)
    }
  }

  /**
   * One line when the job's lineage keeps this worker's allowing default from deciding for
   * it (the broker's `defaultFor` its tree), naming what to change: an operator who set
   * `approvals.default: allow` learns why the job's commands no rule allows are rejected.
   */
  function sayIfLineageBoundsDefault(job: Job, agent: { id: string }): void {
    // Read by shape: the broker (`@dsh/approvals`' service) is composed beside this worker; only its naming is imported.
    const approvals = ctx.get('approvals') as { defaultFor?(agent: { id: string }): { bound?: 'lineage' | 'unsaid' } } | undefined
    const bound = typeof approvals?.defaultFor === 'function' ? approvals.defaultFor(agent).bound : undefined
    if (bound === undefined) return
    const id = printable(job.id!.slice(0, 200))
    if (bound === 'lineage') log.warn("job %s of queue %s: its root rejects what no approval rule decides (the lineage's approvalDefault), so this worker's approvals.default allow does not apply to it: commands no rule allows are rejected; start the root with --permission allow, or allow them by rules in the root's config", id, job.queueName)
    else log.warn("job %s of queue %s: its lineage does not say what its root allows with nobody to ask (the parent runs an older dsh), so this worker's approvals.default allow does not apply to it: only what the lineage's rules allow runs; update the parent's dsh, or allow the commands by rules in the root's config", id, job.queueName)
  }

  /**
   * A job's helper that this worker cannot run as asked, refused before anything starts
   * (the job fails at once, naming what is missing), never run on a default instead: a
   * model spec this worker cannot resolve, or a tool named in its lists that this worker
   * does not have.
   */
  async function refuseUnrunnableHelper(helper: JobHelper): Promise<void> {
    const who = helper.name === undefined ? "the job's helper" : `helper "${helper.name}"`
    if (helper.model !== undefined) {
      try {
        const { adapter, model } = ctx.llm.resolve(helper.model)
        await adapter.prepare?.(model)
      } catch (error) {
        throw new Error(`${who} asks for model "${helper.model}", which this worker cannot run: ${errorMessage(error)}`, { cause: error })
      }
    }
    refuseMissingServers(who, helper.mcpServers)
    // A pattern (mcp__github__*) is read against this worker's tools when the child starts; naming none is no error.
    const named = [...(helper.tools?.allow ?? []), ...(helper.tools?.deny ?? [])].filter((name) => !isToolPattern(name))
    if (named.length === 0) return
    const here = new Set(ctx.tools.list())
    const missing = [...new Set(named.filter((name) => !here.has(name)))]
    if (missing.length > 0) {
      throw new Error(`${who} names tool${missing.length > 1 ? 's' : ''} ${missing.map((name) => `"${name}"`).join(', ')}, which this worker does not have (its tools: ${[...here].join(', ') || 'none'})`)
    }
  }

  /**
   * The MCP servers a job names, each one this worker's own (its `@dsh/mcp` entry, whose
   * tools are listed here): a job carries names only, never a command, and a child that
   * needs a server this worker does not run is refused rather than run without it.
   */
  function refuseMissingServers(who: string, servers: readonly string[] | undefined): void {
    if (servers === undefined) return
    // Read by shape: the MCP client (`@dsh/mcp`'s ctx.mcpServers) is composed beside this worker, not a dependency of it.
    const table = ctx.get('mcpServers') as { names?(): string[] } | undefined
    const configured = typeof table?.names === 'function' ? table.names() : []
    const tools = ctx.tools.list()
    for (const server of servers) {
      if (!configured.includes(server)) {
        throw new Error(`${who} names MCP server "${server}", which this worker does not have (${configured.length > 0 ? `its servers: ${configured.join(', ')}` : 'it has no @dsh/mcp entry with servers'}); add it to the servers of the @dsh/mcp entry of the worker's config`)
      }
      if (!tools.some((name) => name.startsWith(`mcp__${server}__`))) throw new Error(`${who} names MCP server "${server}", which did not start on this worker (see the worker's log for why)`)
    }
  }

  for (const worker of workers) void worker.run()
  await Promise.all(workers.map((worker) => worker.waitUntilReady()))

  let closing: Promise<void> | undefined
  return {
    get running() {
      return active.size
    },
    close: ({ cancel = false } = {}) => {
      // Stop taking jobs first, so a cancelled job is not replaced by a new one.
      closing ??= (async () => {
        await Promise.allSettled(workers.map((worker) => worker.close()))
        await subscriber.quit().catch(() => subscriber.disconnect())
      })()
      // A close already waiting for its jobs can still be told to cancel them.
      if (cancel) for (const controller of active.values()) controller.abort(new Error('the worker is shutting down'))
      return closing
    },
  }
}

/**
 * How the job's agent is made when it runs as a helper: the definition it was started from
 * (its name and hash, recorded in the header), its model and persona, and its tool filter,
 * applied in the agent's set-up so a filter that cannot hold rolls the agent back.
 */
function helperMeta(helper: JobHelper | undefined): { helper?: { name: string; hash: string } } {
  return helper?.name !== undefined && helper.hash !== undefined ? { helper: { name: helper.name, hash: helper.hash } } : {}
}

function helperOptions(helper: JobHelper | undefined): Pick<OpenDelegationOptions, 'agentOptions' | 'setup'> {
  if (helper === undefined) return {}
  const agentOptions: NonNullable<OpenDelegationOptions['agentOptions']> = {}
  if (helper.model !== undefined) agentOptions.model = helper.model
  if (helper.persona !== undefined) agentOptions.persona = helper.persona
  const filter = helper.tools
  if (filter === undefined) return { agentOptions }
  // Patterns (mcp__github__*) name this worker's tools: the parent sent them unexpanded, since its tools are not these.
  const setup: OpenDelegationOptions['setup'] = (childCtx, child) => {
    const known = childCtx.tools.list()
    const allow = filter.allow && expandToolEntries(filter.allow, known)
    const deny = filter.deny && expandToolEntries(filter.deny, known)
    // A deny pattern naming nothing here denies nothing (an empty deny list is no filter).
    if (allow === undefined && (deny === undefined || deny.length === 0)) return
    childCtx.tools.restrict(child.id, { ...(allow && { allow }), ...(deny && deny.length > 0 && { deny }) })
  }
  return { agentOptions, setup }
}

/** A job's progress, coalesced: text merged, sent at most every `intervalMs`; with it the descendants started or ended since. */
class ProgressReporter {
  private pending: SubagentProgress[] = []
  private descendants: ReportedDescendant[] = []
  private timer: NodeJS.Timeout | undefined
  private sending: Promise<void> = Promise.resolve()

  constructor(
    private readonly job: Job,
    private readonly intervalMs: number,
  ) {}

  add(update: SubagentProgress): void {
    const last = this.pending.at(-1)
    if (update.kind === 'text' && last?.kind === 'text') last.text += update.text
    else this.pending.push(update)
    this.timer ??= setTimeout(() => void this.flush(), this.intervalMs)
  }

  addDescendant(descendant: ReportedDescendant): void {
    this.descendants.push(descendant)
    this.timer ??= setTimeout(() => void this.flush(), this.intervalMs)
  }

  flush(): Promise<void> {
    clearTimeout(this.timer)
    this.timer = undefined
    if (this.pending.length === 0 && this.descendants.length === 0) return this.sending
    const report: JobProgress = { v: WIRE_VERSION, updates: this.pending, ...(this.descendants.length > 0 && { descendants: this.descendants }) }
    this.pending = []
    this.descendants = []
    this.sending = this.sending.then(() => this.job.updateProgress(report as unknown as object)).catch(() => {
      // Progress is observe-only: a report that could not be stored loses nothing of the run.
    })
    return this.sending
  }

  stop(): void {
    clearTimeout(this.timer)
    this.timer = undefined
  }
}
