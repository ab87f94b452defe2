/**
 * `dsh worker`: a long-lived process that takes delegations from BullMQ queues on Redis
 * (those a parent's `queue` subagent provider puts there) and runs each as one dsh session
 * of its own (origin `queue`, the job's lineage in its header), at most `--concurrency` at
 * a time per queue. The Redis URL is read from the variable `--redis-env` names (default
 * DSH_REDIS_URL), never from the command line; the queue's signing key likewise from the
 * variable `--key-env` names, and with one only jobs signed with it run. One line on stdout says it is taking jobs;
 * logs go to stderr, among them one line as each job starts and one as it ends (`work-log.ts`). The first SIGTERM/SIGINT stops taking jobs and lets the running ones
 * finish (a second cancels them; their jobs end `aborted`); every session is flushed and
 * every process group it started is taken down; the exit code is 0.
 */
import { parseVerbArgs, wholeNumberOption } from '../args.js'
import { reapTrackedGroups } from '@dsh/process'
import { UsageError } from '../errors.js'
import type {} from '@dsh/approvals'
import type { QueueJobEvent } from '@dsh/queue-worker'
import { onInterrupt } from '../interrupt.js'
import { chooseModel } from '../run.js'
import { startRuntime } from '../runtime.js'
import { workEndLine, workStartLine } from './work-log.js'

/** How this verb's messages name it. */
const VERB = 'dsh worker'

export async function workerVerb(args: string[]): Promise<number> {
  const { values, positionals } = parseVerbArgs('worker', {
    args,
    allowPositionals: true,
    options: {
      queue: { type: 'string', multiple: true },
      concurrency: { type: 'string', default: '4' },
      'redis-env': { type: 'string', default: 'DSH_REDIS_URL' },
      'key-env': { type: 'string' },
      'max-depth': { type: 'string', default: '3' },
      'lock-ms': { type: 'string' },
      config: { type: 'string' },
      model: { type: 'string' },
      'session-dir': { type: 'string' },
      verbose: { type: 'boolean', default: false },
    },
  })
  if (positionals.length > 0) throw new UsageError('USAGE', `dsh worker: takes no positional arguments (got "${positionals[0]}"); name queues with --queue NAME`)
  const { QUEUE_NAME, readRedisUrl, describeRedis, readQueueKey } = await import('@dsh/subagent-queue')
  const queues = values.queue ?? ['dsh']
  for (const name of queues) if (!QUEUE_NAME.test(name)) throw new UsageError('USAGE', `dsh worker: --queue "${name}" is not a queue name (letters, digits, ".", "_" and "-", no ":")`)
  const concurrency = wholeNumberOption(VERB, '--concurrency', values.concurrency, 1, 1_000)!
  const maxDepth = wholeNumberOption(VERB, '--max-depth', values['max-depth'], 0, 100)!
  const lockMs = wholeNumberOption(VERB, '--lock-ms', values['lock-ms'], 1_000, 600_000)
  let redisUrl: string
  try {
    redisUrl = readRedisUrl(values['redis-env']!)
  } catch (error) {
    throw new UsageError('USAGE', `dsh worker: ${(error as Error).message}`)
  }
  let key
  try {
    // Named and unset is refused rather than run unsigned: the operator asked for signed jobs.
    if (values['key-env'] !== undefined) key = readQueueKey(values['key-env'])
  } catch (error) {
    throw new UsageError('USAGE', `dsh worker: --key-env: ${(error as Error).message}`)
  }
  const model = chooseModel(values.model)
  const runtime = await startRuntime({ config: values.config, model, sessionDir: values['session-dir'], verbose: values.verbose, checkReady: true })
  if (!runtime.ctx.llm.config.model && !model) {
    await runtime.dispose()
    throw new UsageError('NO_MODEL', 'dsh worker: no model to run with: pass --model SPEC (e.g. --model scripted:examples/acp-child.yml), set llm.model in --config, or set DEEPSEEK_API_KEY')
  }
  // Fail closed: without the broker nothing would stand between a caller elsewhere and this machine's side effects.
  if (!runtime.ctx.get('approvals')) {
    await runtime.dispose()
    throw new UsageError('USAGE', 'dsh worker: the composition has no approval broker (- id: approvals, name: "@dsh/approvals"), so nothing would decide the side effects its callers ask for; add it back to dsh.yml')
  }
  const { serveQueue, WORKER_NAME } = await import('@dsh/queue-worker')
  let worker
  try {
    worker = await serveQueue(runtime.ctx, { queues, redisUrl, concurrency, maxDepth, cwd: process.cwd(), lockMs, key, onJob: logJob })
  } catch (error) {
    await runtime.dispose()
    throw new UsageError('USAGE', `dsh worker: Redis at ${describeRedis(redisUrl)} cannot be reached: ${(error as Error).message}`, { cause: error })
  }
  process.stdout.write(`taking jobs from ${queues.map((name) => `"${name}"`).join(', ')}\n`)
  const trust = key !== undefined ? `only jobs signed with the key in ${key.variable}` : 'unsigned: whoever can write to this Redis decides what its jobs run and under which rules; see --key-env'
  process.stderr.write(`dsh worker ${WORKER_NAME}: taking jobs from ${queues.join(', ')} on ${describeRedis(redisUrl)} (concurrency ${concurrency}; ${trust})\n`)
  let stop!: () => void
  const stopped = new Promise<void>((resolve) => (stop = resolve))
  let signals = 0
  const stopSignals = onInterrupt(
    () => {
      signals++
      stop()
    },
    () => {
      signals++
      process.stderr.write('dsh worker: cancelling the running jobs\n')
      void worker.close({ cancel: true })
    },
  )
  await stopped
  try {
    if (worker.running > 0) process.stderr.write(`dsh worker: finishing ${worker.running} running job(s); signal again to cancel them\n`)
    await worker.close({ cancel: signals > 1 })
  } finally {
    await runtime.dispose()
    const survivors = await reapTrackedGroups()
    if (survivors.length > 0) process.stderr.write(`dsh worker: process groups ${survivors.join(', ')} outlived SIGKILL\n`)
    stopSignals()
  }
  return 0
}

/** A job's start and end, one line each on stderr. */
function logJob(event: QueueJobEvent): void {
  const about = { what: `job ${event.id}`, where: `queue ${event.queue}, attempt ${event.attempt}`, ...(event.helper !== undefined && { helper: event.helper }), ...(event.label !== undefined && { label: event.label }) }
  process.stderr.write(event.phase === 'start' ? workStartLine(VERB, about) : workEndLine(VERB, about, event))
}
