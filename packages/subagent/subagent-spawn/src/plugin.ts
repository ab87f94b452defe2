import type { Context } from 'cordis'
import Schema from 'schemastery'
import { serviceInstance, type AgentRegistry } from '@dsh/agent'
import type { ContinuablePreparation, SubagentCapabilities, SubagentProvider, SubagentRequest, SubagentRun } from '@dsh/subagent'
import { startInProcessRun } from './in-process-run.js'

export const IN_PROCESS_CAPABILITIES: Readonly<SubagentCapabilities> = Object.freeze({
  outputSchema: true,
  depthLimit: true,
  toolFilter: true,
  persona: true,
  workspace: true,
  sandbox: true,
})

/** A fresh in-process child: its own agent and an empty session. */
export class SpawnProvider implements SubagentProvider {
  readonly capabilities = IN_PROCESS_CAPABILITIES
  readonly inheritsParentContext = false
  readonly inProcess = true

  constructor(private readonly agents: AgentRegistry, readonly name: string) {}

  start(request: SubagentRequest): Promise<SubagentRun> {
    return startInProcessRun(this.agents, request, { provider: this.name })
  }

  /** A continuable spawn child is a fresh agent: the manager creates it; there is no seed. */
  async prepareContinuable(): Promise<ContinuablePreparation> {
    return { kind: 'in-process' }
  }
}

/** Registers a `SpawnProvider` on `ctx.subagents` under `providerName`. */
export class SpawnPlugin {
  static inject = ['subagents', 'agents']
  static Config: Schema<SpawnPlugin.Config> = Schema.object({
    providerName: Schema.string().min(1).default('spawn').description('The name the provider registers under.'),
  })

  constructor(ctx: Context, config: SpawnPlugin.Config) {
    // The plugin restarts if ctx.agents is replaced, so the provider may hold it directly.
    ctx.subagents.registerProvider(new SpawnProvider(serviceInstance(ctx.agents), config.providerName))
  }
}

export namespace SpawnPlugin {
  export interface Config {
    providerName: string
  }
}
