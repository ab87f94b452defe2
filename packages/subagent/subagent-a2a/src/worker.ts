/**
 * Reaching an A2A worker: the provider's connection file. A child here is one run's hold
 * on a worker of the pool (the least busy that answers, `worker-pool.ts`): the SDK client
 * from the worker's agent card (read once per worker) and the HTTP connection the run's
 * stream uses. There is no local process. Connecting is done by the turn (`turn.ts`),
 * which names the task the worker creates; a worker that does not answer ends that run
 * `error` rather than rejecting its start, so a fan-out over several workers gets one
 * settled result per delegation.
 *
 * A continuable child is an A2A context on one worker (`A2aConversation`): each of its
 * turns is a task of that context, on that worker, with a child of its own.
 */
import type { AgentCard, StreamResponse } from '@a2a-js/sdk'
import type { Client } from '@a2a-js/sdk/client'
import { isRecord } from '@dsh/base'
import type { TextBlock } from '@dsh/llm'
import { SubagentError, type Lineage, type RemoteChild, type RemoteConnection, type RemoteTransport, type TurnControl } from '@dsh/subagent'
import type { A2aRunSpec } from './config.js'
import type { A2aApprovalScope } from './approvals.js'
import { A2aTurn } from './turn.js'
import type { Worker, WorkerPool } from './worker-pool.js'

/** How long a worker has to send the agent card and the task's first event. */
export const CONNECT_TIMEOUT_MS = 10_000
/** After a task cancel, how long the worker has to report the task canceled. */
export const CANCEL_GRACE_MS = 5_000
/** The card extension by which a worker promises keep-alive status updates every `params.intervalMs`. */
export const KEEPALIVE_EXTENSION = 'urn:dsh:a2a:keepalive:v1'
/** The card extension by which a worker stores the contexts a client names and honours `metadata.dsh.existingContext`: what a continuable child needs. */
export const CONTEXTS_EXTENSION = 'urn:dsh:a2a:contexts:v1'

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

/** The A2A wire for `@dsh/subagent`'s remote lifecycle: a one-shot run's, or a continuable child's context. */
export class A2aTransport implements RemoteTransport<A2aChild> {
  readonly childName = 'the A2A worker'
  readonly interruptName = 'the task cancel'
  readonly cancelGraceMs = CANCEL_GRACE_MS
  readonly cancelGraceKey = 'the cancel grace period'
  // The turn bounds the connection itself (CONNECT_TIMEOUT_MS) and ends the run on expiry;
  // this is the backstop for a start that never settles at all.
  readonly startupTimeoutMs = CONNECT_TIMEOUT_MS * 3
  readonly startupTimeoutKey = 'the connect timeout'
  readonly timeoutIncludesStartup = true
  readonly initialStage = 'agent card'
  readonly turnStage = 'agent card'
  private worker: Worker | undefined

  constructor(
    private readonly spec: A2aRunSpec,
    private readonly pool: WorkerPool,
    /** The delegation's lineage, sent with its message. */
    private readonly lineage: Lineage,
    /** A continuable child's context; none for a one-shot run. */
    private readonly conversation: A2aConversation | undefined,
    /** Whose side effects the worker's approval requests are, for the parent's broker (none: they are rejected). */
    private readonly approvals: A2aApprovalScope | undefined,
  ) {
    this.worker = conversation?.worker
  }

  get conversationName(): string {
    return this.conversation ? `A2A context ${this.conversation.contextId} on ${this.conversation.worker.url}` : 'an A2A task'
  }

  get provider(): string {
    return this.spec.provider
  }

  get timeoutMs(): number | undefined {
    return this.spec.timeoutMs
  }

  storedAt(): string | undefined {
    return this.worker && `the A2A worker ${this.worker.url}`
  }

  connect(): RemoteConnection<A2aChild> {
    // A one-shot run takes the least busy worker; a context's turns go where the context is.
    let worker = this.conversation?.worker
    if (worker) this.pool.hold(worker)
    else worker = this.pool.acquire()
    this.worker = worker
    return { child: new A2aChild(worker, this.pool), opened: Promise.resolve() }
  }

  openTurn(message: TextBlock[], control: TurnControl): A2aTurn {
    return new A2aTurn(this.spec, message, control, this.lineage, this.conversation, this.approvals)
  }

  startFailed(message: string, stage: string): SubagentError {
    return new SubagentError('START_FAILED', `the A2A worker ${this.worker?.url ?? ''} could not start the run at stage ${stage}: ${message}`)
  }
}

/** Whether a card says its agent accepts a context named by the client (a dsh worker with stored sessions). */
export function acceptsNamedContexts(card: AgentCard): boolean {
  return card.capabilities?.extensions?.some((extension) => extension.uri === CONTEXTS_EXTENSION) === true
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
