/**
 * Reaching an A2A worker: the provider's connection file. A child here (`child.ts`) is one
 * run's hold on a worker of the pool (the least busy that answers, `worker-pool.ts`): the
 * SDK client from the worker's agent card (read once per worker) and the HTTP connection
 * the run's stream uses. There is no local process. Connecting is done by the turn
 * (`turn.ts`), which names the task the worker creates; a worker that does not answer ends that run
 * `error` rather than rejecting its start, so a fan-out over several workers gets one
 * settled result per delegation.
 *
 * A continuable child is an A2A context on one worker (`A2aConversation`): each of its
 * turns is a task of that context, on that worker, with a child of its own.
 */
import type { AgentCard } from '@a2a-js/sdk'
import type { TextBlock } from '@dsh/llm'
import { SubagentError, type Lineage, type RemoteConnection, type RemoteTransport, type TurnControl } from '@dsh/subagent'
import type { A2aRunSpec } from './config.js'
import type { A2aApprovalScope } from './approvals.js'
import { A2aChild, CANCEL_GRACE_MS, CONNECT_TIMEOUT_MS, type A2aConversation } from './child.js'
import { A2aTurn } from './turn.js'
import type { Worker, WorkerPool } from './worker-pool.js'

/** The card extension by which a worker stores the contexts a client names and honours `metadata.dsh.existingContext`: what a continuable child needs. */
export const CONTEXTS_EXTENSION = 'urn:dsh:a2a:contexts:v1'

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
