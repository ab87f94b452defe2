import type { Context } from 'cordis'
import { NO_CAPABILITIES, type SubagentCapabilities, type SubagentProvider, type SubagentRequest, type SubagentRun } from '@dsh/subagent'
import { startAcpRun } from './acp-run.js'
import { AcpProviderConfig, resolveAcpSpec, type AcpRunSpec } from './config.js'

/**
 * Of the start-time features only the depth bound: it is checked here before anything is
 * spawned, and travels in `_meta.dsh` so a dsh child applies it to its own children.
 */
export const ACP_CAPABILITIES: Readonly<SubagentCapabilities> = Object.freeze({ ...NO_CAPABILITIES, depthLimit: true })

/**
 * An ACP agent process per delegation. Out of process: no local agent, and the child
 * never sees the parent's conversation.
 */
export class AcpProvider implements SubagentProvider {
  readonly capabilities = ACP_CAPABILITIES
  readonly inheritsParentContext = false

  constructor(readonly name: string, private readonly spec: AcpRunSpec) {}

  start(request: SubagentRequest): Promise<SubagentRun> {
    return startAcpRun(this.spec, request)
  }
}

/** Registers an `AcpProvider` on `ctx.subagents` under `providerName`. */
export class AcpPlugin {
  static inject = ['subagents']
  static Config = AcpProviderConfig

  constructor(ctx: Context, config: AcpProviderConfig) {
    ctx.subagents.registerProvider(new AcpProvider(config.providerName, resolveAcpSpec(config)))
  }
}
