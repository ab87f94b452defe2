import type { Context } from 'cordis'
import Schema from 'schemastery'
import { serviceInstance, type AgentRegistry } from '@dsh/agent'
import type { ContinuablePreparation, PrepareContinuableRequest, SubagentProvider, SubagentRequest, SubagentRun } from '@dsh/subagent'
import { IN_PROCESS_CAPABILITIES, startInProcessRun } from '@dsh/subagent-spawn'

/**
 * An in-process child seeded with the parent's completed turns: everything through the
 * parent's last `turn/end`, shared rather than copied. The in-flight turn is left out:
 * its delegating call has no result yet, so it cannot be replayed as history. With no
 * completed turn the child starts empty, like spawn.
 */
export class ForkProvider implements SubagentProvider {
  readonly capabilities = IN_PROCESS_CAPABILITIES
  readonly inheritsParentContext = true

  constructor(private readonly agents: AgentRegistry, readonly name: string) {}

  start(request: SubagentRequest): Promise<SubagentRun> {
    const { session } = request.parent
    const length = session.completedLength
    return startInProcessRun(this.agents, request, { provider: this.name, ...(length > 0 && { seed: { session, length } }) })
  }

  /** The same completed-turn prefix as a one-shot fork; the seed is history, never the child's descriptor. */
  async prepareContinuable({ parent }: PrepareContinuableRequest): Promise<ContinuablePreparation> {
    const length = parent.session.completedLength
    return { kind: 'in-process', ...(length > 0 && { seed: { session: parent.session, length } }) }
  }
}

export class ForkPlugin {
  static inject = ['subagents', 'agents']
  static Config: Schema<ForkPlugin.Config> = Schema.object({
    providerName: Schema.string().min(1).default('fork').description('The name the provider registers under.'),
  })

  constructor(ctx: Context, config: ForkPlugin.Config) {
    ctx.subagents.registerProvider(new ForkProvider(serviceInstance(ctx.agents), config.providerName))
  }
}

export namespace ForkPlugin {
  export interface Config {
    providerName: string
  }
}

export default ForkPlugin
