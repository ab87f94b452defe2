import type { Context } from 'cordis'
import { lineageOf, NO_CAPABILITIES, startRemoteRun, type ReportedDescendant, type SubagentCapabilities, type SubagentProvider, type SubagentRequest, type SubagentRun } from '@dsh/subagent'
import { QueueClient } from './client.js'
import { QueueProviderConfig, resolveQueueSpec, type QueueRunSpec } from './config.js'
import { QueueTransport } from './transport.js'
import { jobHelperOf } from './wire.js'

/**
 * The depth bound travels in the job's lineage, and a persona and a tool filter in its
 * helper (with the model spec, `agentOptions.model`): the worker applies each, and refuses
 * the job when it lacks a tool or cannot resolve the model.
 */
const QUEUE_CAPABILITIES: Readonly<SubagentCapabilities> = Object.freeze({ ...NO_CAPABILITIES, depthLimit: true, persona: true, toolFilter: true })

/** Each delegation is one BullMQ job, run by whichever `dsh worker` of the queue takes it. Out of process, no shared context. */
class QueueProvider implements SubagentProvider {
  readonly capabilities = QUEUE_CAPABILITIES
  readonly inheritsParentContext = false
  /** A job is named by its call: made again, the call finds its job (running or finished) instead of enqueueing another. */
  readonly resumableCalls = true
  readonly client: QueueClient

  constructor(readonly name: string, private readonly spec: QueueRunSpec) {
    this.client = new QueueClient(spec)
  }

  start(request: SubagentRequest): Promise<SubagentRun> {
    // Who the descendants a worker names are below: this child, started by this parent's call.
    const told = this.spec.descendantBelow
    const descendant = told && ((info: ReportedDescendant) => told({ ...info, parentId: request.parent.id, provider: this.name, ...(request.label !== undefined && { label: request.label }), ...(request.helper !== undefined && { childHelper: request.helper.name }), ...(request.callId !== undefined && { callId: request.callId }) }))
    return startRemoteRun(request, new QueueTransport(this.spec, this.client, lineageOf(request, this.name, request.maxDepth), jobHelperOf(request), descendant))
  }

  /** Close the queue connections (the plugin's disposal). */
  close(): Promise<void> {
    return this.client.close()
  }
}

/** Registers a `QueueProvider` on `ctx.subagents` under `providerName`. */
export class QueuePlugin {
  static inject = ['subagents']
  static Config = QueueProviderConfig

  constructor(ctx: Context, config: QueueProviderConfig) {
    const log = ctx.logger('subagent-queue')
    const spec: QueueRunSpec = {
      ...resolveQueueSpec(config),
      progressDropped: (reason) => log.debug('a progress update from a queue worker was dropped: %s', reason),
      // Heard by name (the hooks plugin fires SubagentStart/SubagentStop from it): not an event of @dsh/subagent's.
      descendantBelow: (info) => (ctx.emit as unknown as (event: string, info: unknown) => void)('subagent/descendant', info),
    }
    const provider = new QueueProvider(spec.provider, spec)
    ctx.subagents.registerProvider(provider)
    ctx.effect(() => () => provider.close(), 'subagent-queue connections')
  }
}
