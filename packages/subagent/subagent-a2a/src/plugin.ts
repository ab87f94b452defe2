import { randomUUID } from 'node:crypto'
import type { Context } from 'cordis'
import { errorMessage } from '@dsh/base'
import {
  lineageOf,
  NO_CAPABILITIES,
  openConversation,
  startRemoteRun,
  SubagentError,
  type ContinuablePreparation,
  type PrepareContinuableRequest,
  type RemoteChildRecord,
  type RemoteConversation,
  type SubagentCapabilities,
  type SubagentProvider,
  type SubagentRequest,
  type SubagentRun,
} from '@dsh/subagent'
import { delegationName } from '@dsh/approvals'
import type { Agent } from '@dsh/agent'
import { CONNECT_TIMEOUT_MS } from './child.js'
import { acceptsNamedContexts, A2aTransport, CONTEXTS_EXTENSION } from './worker.js'
import { A2aProviderConfig, resolveA2aSpec, type A2aRunSpec } from './config.js'
import { WorkerPool, type Worker } from './worker-pool.js'
import type { A2aApprovalScope } from './approvals.js'

/** The depth bound travels in `metadata.dsh` and the worker applies it; nothing else is supported at start. */
const A2A_CAPABILITIES: Readonly<SubagentCapabilities> = Object.freeze({ ...NO_CAPABILITIES, depthLimit: true })

/**
 * Each delegation is one A2A task on one of the configured workers. Out of process, no
 * shared context. Continuable on dsh workers that store sessions: a continuable child is
 * an A2A context on one worker (a context id this client names), each of its turns a
 * task of that context; after a restart the next message continues the same context.
 */
export class A2aProvider implements SubagentProvider {
  readonly capabilities = A2A_CAPABILITIES
  readonly inheritsParentContext = false
  readonly pool: WorkerPool

  constructor(readonly name: string, private readonly spec: A2aRunSpec) {
    this.pool = new WorkerPool(spec.urls, spec.token)
  }

  start(request: SubagentRequest): Promise<SubagentRun> {
    try {
      this.refuseModel(request.agentOptions?.model)
    } catch (error) {
      return Promise.reject(error)
    }
    return startRemoteRun(request, new A2aTransport(this.spec, this.pool, lineageOf(request, this.name, request.maxDepth), undefined, this.approvalScope(request.parent, request.label, request)))
  }

  /**
   * A continuable child: a worker that answers and stores the contexts a client names
   * (its card lists `CONTEXTS_EXTENSION`) is chosen now, least busy first, and a fresh
   * context id named for the child; its first message (sent by the manager) opens the
   * context there. Nothing runs on the worker between messages.
   */
  async prepareContinuable({ childId, parent, descriptor, request, signal }: PrepareContinuableRequest): Promise<ContinuablePreparation> {
    this.refuseModel(request.agentOptions?.model)
    const worker = await this.workerForContexts(signal)
    // The helper's permission levels travel with the child, as for a one-shot run.
    const lineage = lineageOf({ parent, label: descriptor.label, callId: request.callId, permissions: request.permissions }, this.name, request.maxDepth)
    const contextId = randomUUID()
    const transport = new A2aTransport(this.spec, this.pool, lineage, { worker, contextId, opened: false }, this.approvalScope(parent, descriptor.label, request, childId))
    return { kind: 'remote', conversation: openConversation(transport, undefined, contextId, { worker: worker.url }) }
  }

  /**
   * Reopen a record an earlier process wrote: the context lives on the worker its record
   * names (which must still be one of `urls`: the token goes to no other), and the next
   * message continues it there. A worker that no longer knows the context says so then.
   */
  async resumeContinuable(record: RemoteChildRecord, signal: AbortSignal): Promise<RemoteConversation> {
    if (signal.aborted) throw new SubagentError('ABORTED', `resuming A2A child ${record.childId} was cancelled`, { cause: signal.reason })
    const url = record.resumeData?.worker
    if (typeof url !== 'string') throw new SubagentError('INVALID_REQUEST', `the record of A2A child ${record.childId} names no worker in its resumeData (got ${JSON.stringify(url)}); it was not written by this provider`)
    const worker = this.pool.byUrl(url)
    if (worker === undefined) {
      throw new SubagentError('INVALID_REQUEST', `A2A child ${record.childId} lives in a context on the worker ${url}, which is not in the "${this.name}" provider's urls (${this.spec.urls.join(', ')}); add it back to continue the child`)
    }
    const lineage = { parentSession: record.parentId, delegationDepth: record.depth, provider: this.name, label: record.descriptor.label }
    // The parent is live (it is the one resuming its child): its broker hears the worker's requests again.
    const parent = this.spec.agent?.(record.parentId)
    const scope = parent && this.approvalScope(parent, record.descriptor.label, {}, record.childId)
    const transport = new A2aTransport(this.spec, this.pool, lineage, { worker, contextId: record.remoteId, opened: true }, scope)
    return openConversation(transport, undefined, record.remoteId, { worker: url })
  }

  /** Whose side effects the worker's approval requests are, for the parent's broker. */
  private approvalScope(parent: Agent, label: string | undefined, request: Pick<SubagentRequest, 'helper' | 'permissions' | 'callId'>, childId?: string): A2aApprovalScope {
    const scope: A2aApprovalScope = { parent, name: delegationName({ provider: this.name, label, helper: request.helper?.name }) }
    // Who the descendants a dsh worker names are below: this child, started by this parent's call.
    const told = this.spec.descendantBelow
    if (told !== undefined) scope.descendant = (info) => told({ ...info, parentId: parent.id, provider: this.name, ...(label !== undefined && { label }), ...(request.helper !== undefined && { childHelper: request.helper.name }), ...(request.callId !== undefined && { callId: request.callId }) })
    if (request.permissions !== undefined) scope.levels = request.permissions
    if (childId !== undefined) scope.childId = childId
    return scope
  }

  private refuseModel(model: string | undefined): void {
    if (model === undefined) return
    throw new SubagentError(
      'INVALID_REQUEST',
      `the "${this.name}" subagent provider cannot choose the model of an A2A worker (asked for "${model}"); choose it where the worker runs (dsh a2a serve --model SPEC) and drop agentOptions.model`,
    )
  }

  /**
   * The least busy worker that answers and can keep a context, trying each worker once:
   * one that does not answer is marked (and skipped by later runs) as for any run.
   */
  private async workerForContexts(signal: AbortSignal): Promise<Worker> {
    const problems: string[] = []
    for (let tries = 0; tries < this.pool.workers.length; tries++) {
      const worker = this.pool.acquire()
      this.pool.release(worker)
      if (problems.some((problem) => problem.startsWith(`${worker.url}:`))) break
      let card
      try {
        const client = await withTimeout(worker.connect(), signal, CONNECT_TIMEOUT_MS)
        card = await client.getAgentCard()
      } catch (error) {
        if (signal.aborted) throw new SubagentError('ABORTED', 'the delegation was cancelled while the A2A worker was being chosen', { cause: signal.reason })
        worker.markUnreachable()
        problems.push(`${worker.url}: ${errorMessage(error)}`)
        continue
      }
      worker.markAnswering()
      if (acceptsNamedContexts(card)) return worker
      problems.push(`${worker.url}: its agent card does not list the extension ${CONTEXTS_EXTENSION} (a dsh a2a serve that stores sessions does)`)
    }
    // Only workers that answered and cannot keep a context make it a matter of capability.
    const unable = problems.some((problem) => problem.includes(CONTEXTS_EXTENSION))
    throw new SubagentError(
      unable ? 'UNSUPPORTED_CAPABILITY' : 'START_FAILED',
      `no A2A worker of the "${this.name}" provider can keep a continuable child (a context this client names, continued by later messages): ${problems.join('; ')}; delegate to it one-shot, or use workers that list ${CONTEXTS_EXTENSION}`,
    )
  }
}

/** `promise`, unless `signal` aborts or `ms` pass first. */
function withTimeout<T>(promise: Promise<T>, signal: AbortSignal, ms: number): Promise<T> {
  if (signal.aborted) return Promise.reject(signal.reason)
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms)
    const onAbort = () => reject(signal.reason)
    signal.addEventListener('abort', onAbort, { once: true })
    promise.then(resolve, reject).finally(() => {
      clearTimeout(timer)
      signal.removeEventListener('abort', onAbort)
    })
  })
}

/** Registers an `A2aProvider` on `ctx.subagents` under `providerName`. */
export class A2aPlugin {
  static inject = ['subagents']
  static Config = A2aProviderConfig

  constructor(ctx: Context, config: A2aProviderConfig) {
    const log = ctx.logger('subagent-a2a')
    const spec: A2aRunSpec = {
      ...resolveA2aSpec(config),
      progressDropped: (reason) => log.debug('a progress update from an A2A worker was dropped: %s', reason),
      approvals: () => ctx.get('approvals'),
      agent: (id) => ctx.get('agents')?.get(id),
      // Heard by name (the hooks plugin fires SubagentStart/SubagentStop from it): not an event of @dsh/subagent's.
      descendantBelow: (info) => (ctx.emit as unknown as (event: string, info: unknown) => void)('subagent/descendant', info),
    }
    ctx.subagents.registerProvider(new A2aProvider(spec.provider, spec))
  }
}
