import type { Context } from 'cordis'
import { lineageOf, NO_CAPABILITIES, startRemoteRun, SubagentError, type SubagentCapabilities, type SubagentProvider, type SubagentRequest, type SubagentRun } from '@dsh/subagent'
import { QueueClient } from './client.js'
import { QueueProviderConfig, resolveQueueSpec, type QueueRunSpec } from './config.js'
import { QueueTransport } from './transport.js'

/** The depth bound travels in the job's lineage and the worker applies it; the rest is the worker's own configuration. */
export const QUEUE_CAPABILITIES: Readonly<SubagentCapabilities> = Object.freeze({ ...NO_CAPABILITIES, depthLimit: true })

/** Each delegation is one BullMQ job, run by whichever `dsh worker` of the queue takes it. Out of process, no shared context. */
export class QueueProvider implements SubagentProvider {
  readonly capabilities = QUEUE_CAPABILITIES
  readonly inheritsParentContext = false
  /** A job is named by its call: made again, the call finds its job (running or finished) instead of enqueueing another. */
  readonly resumableCalls = true
  readonly client: QueueClient

  constructor(readonly name: string, private readonly spec: QueueRunSpec) {
    this.client = new QueueClient(spec)
  }

  start(request: SubagentRequest): Promise<SubagentRun> {
    if (request.agentOptions?.model !== undefined) {
      return Promise.reject(
        new SubagentError(
          'INVALID_REQUEST',
          `the "${this.name}" subagent provider cannot choose the model of a queue worker (asked for "${request.agentOptions.model}"); choose it where the worker runs (dsh worker --model SPEC) and drop agentOptions.model`,
        ),
      )
    }
    return startRemoteRun(request, new QueueTransport(this.spec, this.client, lineageOf(request, this.name, request.maxDepth)))
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
    const spec: QueueRunSpec = { ...resolveQueueSpec(config), progressDropped: (reason) => log.debug('a progress update from a queue worker was dropped: %s', reason) }
    const provider = new QueueProvider(spec.provider, spec)
    ctx.subagents.registerProvider(provider)
    ctx.effect(() => () => provider.close(), 'subagent-queue connections')
  }
}
