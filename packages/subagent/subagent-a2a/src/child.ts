/**
 * One run's hold on an A2A worker: the provider's transport, which the connection file
 * (`worker.ts`) makes and the turn file (`turn.ts`) speaks through. The SDK client from
 * the worker's agent card (read once per worker) and the HTTP connection the run's stream
 * uses; there is no local process.
 */
import type { AgentCard, StreamResponse } from '@a2a-js/sdk'
import type { Client } from '@a2a-js/sdk/client'
import { isRecord } from '@dsh/base'
import { SubagentError, type RemoteChild } from '@dsh/subagent'
import type { Worker, WorkerPool } from './worker-pool.js'

/** How long a worker has to send the agent card and the task's first event. */
export const CONNECT_TIMEOUT_MS = 10_000
/** After a task cancel, how long the worker has to report the task canceled. */
export const CANCEL_GRACE_MS = 5_000
/** The card extension by which a worker promises keep-alive status updates every `params.intervalMs`. */
export const KEEPALIVE_EXTENSION = 'urn:dsh:a2a:keepalive:v1'
/** One run's hold on a worker. */
export class A2aChild implements RemoteChild {
  /** Aborting it cuts the run's HTTP requests. */
  readonly connection = new AbortController()
  client: Client | undefined
  stream: AsyncGenerator<StreamResponse, void, undefined> | undefined
  /** Set once the run let go of the worker (closed, or left before it answered). */
  released = false
  /** Whether this run still counts toward its worker's load. */
  private holdsWorker = true

  constructor(
    readonly worker: Worker,
    private readonly pool: WorkerPool,
  ) {}

  /** The worker's client and the keep-alive period its card promises; `undefined` from `promisedKeepAlive` when it promises none. */
  async connect(): Promise<{ client: Client; keepAliveMs: number | undefined }> {
    this.client = await raceAbort(this.worker.connect(), this.connection.signal)
    return { client: this.client, keepAliveMs: promisedKeepAlive(await this.client.getAgentCard()) }
  }

  /** The task reached its end on the worker (or never began): the worker is that much less busy, whenever the run is disposed. */
  leave(): void {
    if (!this.holdsWorker) return
    this.holdsWorker = false
    this.pool.release(this.worker)
  }

  /**
   * The lifecycle asks before a turn. A child holds one task: once it ended, a
   * conversation's next turn takes a new child (the same worker, the same context).
   */
  async running(): Promise<boolean> {
    return !this.released && this.holdsWorker
  }

  async close(): Promise<void> {
    if (this.released) return
    this.released = true
    this.leave()
    this.connection.abort(new SubagentError('ABORTED', 'the run was released'))
    await this.stream?.return(undefined).catch(() => {
      // The stream was aborted just above; its rejection only repeats that.
    })
  }
}

/**
 * A continuable child's context: the worker that holds it and its id, which this client
 * names itself (a dsh worker stores contexts it is given and announces it with
 * `CONTEXTS_EXTENSION`). The first message opens it there; once a task of it was accepted
 * (and after a cold resume) each message says it must exist (`metadata.dsh.existingContext`).
 */
export interface A2aConversation {
  readonly worker: Worker
  readonly contextId: string
  /** Whether the worker is known to hold the context (a task of it was accepted). */
  opened: boolean
}

/** The keep-alive period a card promises (`KEEPALIVE_EXTENSION`), when it is a sane one. */
function promisedKeepAlive(card: AgentCard): number | undefined {
  const extension = card.capabilities?.extensions?.find((candidate) => candidate.uri === KEEPALIVE_EXTENSION)
  const intervalMs: unknown = isRecord(extension?.params) ? extension.params.intervalMs : undefined
  return typeof intervalMs === 'number' && Number.isInteger(intervalMs) && intervalMs >= 100 && intervalMs <= 300_000 ? intervalMs : undefined
}

function raceAbort<T>(promise: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(signal.reason)
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason)
    signal.addEventListener('abort', onAbort, { once: true })
    promise.then(resolve, reject).finally(() => signal.removeEventListener('abort', onAbort))
  })
}
