/**
 * The provider's connections to one queue, shared by all its runs: the BullMQ `Queue` jobs
 * are added to, the `QueueEvents` stream their progress and endings arrive on (one reader,
 * dispatched by job id), and a client that publishes cancels on the queue's cancel channel.
 * Made on the first delegation, so a composition that never delegates never connects, nor
 * loads BullMQ (kept outside dsh's bundle, read from disk without a code cache: with ioredis,
 * about 100 ms of a `dsh run` that composed the provider, before it was imported here).
 */
import type { Queue, QueueEvents } from 'bullmq'
import type { Redis } from 'ioredis'
import { SubagentError } from '@dsh/subagent'
import type { QueueRunSpec } from './config.js'
import { CONNECT_TIMEOUT_MS, redisClient, redisFailure } from './redis.js'

/** The channel a queue's cancels are published on; every `dsh worker` of the queue listens. */
export function cancelChannel(queue: string): string {
  return `dsh:queue:${queue}:cancel`
}

/** How long closing waits for the connections to close gracefully. */
const CLOSE_GRACE_MS = 2_000

interface Opened {
  queue: Queue
  events: QueueEvents
  publisher: Redis
  /** Every connection made, to cut at the end. */
  clients: Redis[]
}

/** What one job's run hears from the queue's event stream. */
interface JobListener {
  progress(data: unknown): void
  completed(returnvalue: unknown): void
  failed(reason: string): void
}

export class QueueClient {
  private opening: Promise<Opened> | undefined
  private readonly listeners = new Map<string, JobListener>()
  private closed = false

  constructor(private readonly spec: QueueRunSpec) {}

  /** The connections, open; rejects with one line when Redis cannot be reached in time. */
  open(): Promise<Opened> {
    if (this.closed) return Promise.reject(new SubagentError('START_FAILED', 'the queue provider was closed'))
    this.opening ??= this.connect().catch((error: unknown) => {
      this.opening = undefined
      throw error
    })
    return this.opening
  }

  listen(jobId: string, listener: JobListener): () => void {
    this.listeners.set(jobId, listener)
    return () => {
      if (this.listeners.get(jobId) === listener) this.listeners.delete(jobId)
    }
  }

  /** Close every connection: gracefully within `CLOSE_GRACE_MS`, then cut (a Redis that went away must not keep the process alive). */
  async close(): Promise<void> {
    this.closed = true
    const opened = await this.opening?.catch(() => undefined)
    if (!opened) return
    let timer: NodeJS.Timeout | undefined
    const grace = new Promise<void>((resolve) => (timer = setTimeout(resolve, CLOSE_GRACE_MS)))
    await Promise.race([Promise.allSettled([opened.queue.close(), opened.events.close(), opened.publisher.quit()]), grace])
    clearTimeout(timer)
    for (const client of opened.clients) client.disconnect()
  }

  private async connect(): Promise<Opened> {
    const { spec } = this
    const { Queue, QueueEvents } = await import('bullmq')
    const publisher = redisClient(spec.redisUrl, false)
    const queueConnection = redisClient(spec.redisUrl, false)
    const eventsConnection = redisClient(spec.redisUrl, true)
    const queue = new Queue(spec.queue, { connection: queueConnection })
    const events = new QueueEvents(spec.queue, { connection: eventsConnection })
    // Errors reach the delegation whose command fails; the blocking reader reconnects on its own.
    queue.on('error', () => {})
    events.on('error', () => {})
    events.on('progress', ({ jobId, data }) => this.listeners.get(jobId)?.progress(data))
    events.on('completed', ({ jobId, returnvalue }) => this.listeners.get(jobId)?.completed(returnvalue))
    events.on('failed', ({ jobId, failedReason }) => this.listeners.get(jobId)?.failed(failedReason))
    let timer: NodeJS.Timeout | undefined
    const timeout = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`no answer within ${CONNECT_TIMEOUT_MS} ms`)), CONNECT_TIMEOUT_MS)))
    try {
      await Promise.race([Promise.all([publisher.ping(), queue.waitUntilReady(), events.waitUntilReady()]), timeout])
    } catch (error) {
      // Never connected: closing gracefully would wait for a server that is not there.
      for (const client of [publisher, queueConnection, eventsConnection]) client.disconnect()
      void queue.close().catch(() => {})
      void events.close().catch(() => {})
      throw new SubagentError('START_FAILED', `Redis at ${spec.redisShown} (queue "${spec.queue}") cannot be reached: ${redisFailure(spec.redisUrl, error, [publisher, queueConnection, eventsConnection])}`, { cause: error })
    } finally {
      clearTimeout(timer)
    }
    return { queue, events, publisher, clients: [publisher, queueConnection, eventsConnection] }
  }
}
