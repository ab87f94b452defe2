import type { Context } from 'cordis'
import Schema from 'schemastery'
import { serviceInstance, type AgentRegistry } from '@dsh/agent'
import type { ContinuablePreparation, PrepareContinuableRequest, SubagentProvider, SubagentRequest, SubagentRun } from '@dsh/subagent'
import { IN_PROCESS_CAPABILITIES, startInProcessRun } from '@dsh/subagent-spawn'
import type { Session } from '@dsh/session'

/**
 * An in-process child seeded with the parent's conversation as its model last saw it:
 * everything logged before the parent's latest response, shared rather than copied. That
 * is every completed turn and, of the turn in flight, the user's message and every step
 * whose tool calls have their results; only the step with the pending delegating call is
 * left out (its call has no result yet, so it cannot be history). The child's request is
 * then the parent's last request with the child's prompt after it: byte for byte the same
 * prefix, which a provider's prompt cache serves. With nothing before the first response
 * (a fork requested outside any turn) the completed turns are the seed, as many as there are.
 */
export function forkPoint(session: Session): number {
  for (let seq = session.length - 1; seq >= session.completedLength; seq--) {
    if (session.at(seq)?.type === 'assistant/message') return seq
  }
  return session.completedLength
}

/** Forks children from the point `forkPoint` names. */
export class ForkProvider implements SubagentProvider {
  readonly capabilities = IN_PROCESS_CAPABILITIES
  readonly inheritsParentContext = true
  readonly inProcess = true

  constructor(private readonly agents: AgentRegistry, readonly name: string) {}

  start(request: SubagentRequest): Promise<SubagentRun> {
    const { session } = request.parent
    const length = forkPoint(session)
    return startInProcessRun(this.agents, request, { provider: this.name, ...(length > 0 && { seed: { session, length } }) })
  }

  /** The same prefix as a one-shot fork; the seed is history, never the child's descriptor. */
  async prepareContinuable({ parent }: PrepareContinuableRequest): Promise<ContinuablePreparation> {
    const length = forkPoint(parent.session)
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
