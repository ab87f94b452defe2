import { Context, Service } from 'cordis'
import type { UserMessage } from '@dsh/llm'
import { serviceInstance, type TurnDriver, type TurnResult, type TurnRuntime } from '@dsh/agent'
import { runTurn, type LoopServices } from './loop.js'

/** Provides `ctx.agentLoop`, the turn driver `ctx.agents` runs every agent with. */
export class AgentLoop extends Service implements TurnDriver {
  static inject = ['llm', 'tools']
  private readonly services: LoopServices

  constructor(ctx: Context) {
    super(ctx, 'agentLoop')
    // Held directly: the loop calls them several times per step (see `serviceInstance`).
    this.services = { llm: serviceInstance(ctx.llm), tools: serviceInstance(ctx.tools) }
  }

  runTurn(runtime: TurnRuntime, input: UserMessage[], signal: AbortSignal): Promise<TurnResult> {
    return runTurn(this.services, runtime, input, signal)
  }
}
