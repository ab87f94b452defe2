import { Context, Service } from 'cordis'
import type { UserMessage } from '@dsh/llm'
import type { TurnDriver, TurnResult, TurnRuntime } from '@dsh/agent'
import { runTurn, type LoopServices } from './loop.js'

/** Provides `ctx.agentLoop`, the turn driver `ctx.agents` runs every agent with. */
export class AgentLoop extends Service implements TurnDriver {
  static inject = ['llm', 'tools']
  private readonly services: LoopServices

  constructor(ctx: Context) {
    super(ctx, 'agentLoop')
    this.services = { llm: ctx.llm, tools: ctx.tools }
  }

  runTurn(runtime: TurnRuntime, input: UserMessage[], signal: AbortSignal): Promise<TurnResult> {
    return runTurn(this.services, runtime, input, signal)
  }
}
