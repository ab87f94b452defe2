import type { Context } from 'cordis'
import { lineageOf, NO_CAPABILITIES, startRemoteRun, SubagentError, type SubagentCapabilities, type SubagentProvider, type SubagentRequest, type SubagentRun } from '@dsh/subagent'
import { A2aTransport } from './worker.js'
import { A2aProviderConfig, resolveA2aSpec, type A2aRunSpec } from './config.js'
import { WorkerPool } from './worker-pool.js'

/** The depth bound travels in `metadata.dsh` and the worker applies it; nothing else is supported at start. */
export const A2A_CAPABILITIES: Readonly<SubagentCapabilities> = Object.freeze({ ...NO_CAPABILITIES, depthLimit: true })

/** Each delegation is one A2A task on one of the configured workers. Out of process, no shared context. */
export class A2aProvider implements SubagentProvider {
  readonly capabilities = A2A_CAPABILITIES
  readonly inheritsParentContext = false
  readonly pool: WorkerPool

  constructor(readonly name: string, private readonly spec: A2aRunSpec) {
    this.pool = new WorkerPool(spec.urls, spec.token)
  }

  start(request: SubagentRequest): Promise<SubagentRun> {
    if (request.agentOptions?.model !== undefined) {
      return Promise.reject(
        new SubagentError(
          'INVALID_REQUEST',
          `the "${this.name}" subagent provider cannot choose the model of an A2A worker (asked for "${request.agentOptions.model}"); choose it where the worker runs (dsh a2a serve --model SPEC) and drop agentOptions.model`,
        ),
      )
    }
    return startRemoteRun(request, new A2aTransport(this.spec, this.pool, lineageOf(request, this.name, request.maxDepth)))
  }
}

/** Registers an `A2aProvider` on `ctx.subagents` under `providerName`. */
export class A2aPlugin {
  static inject = ['subagents']
  static Config = A2aProviderConfig

  constructor(ctx: Context, config: A2aProviderConfig) {
    const log = ctx.logger('subagent-a2a')
    const spec: A2aRunSpec = { ...resolveA2aSpec(config), progressDropped: (reason) => log.debug('a progress update from an A2A worker was dropped: %s', reason) }
    ctx.subagents.registerProvider(new A2aProvider(spec.provider, spec))
  }
}
