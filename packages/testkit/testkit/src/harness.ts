/**
 * A real dsh harness in one call, for tests: the real services (llm, sessions, tools,
 * agent loop, agents) in a real Cordis context, with the scripted adapter as the only
 * fake part. Extra plugins load beside them.
 */
import { Context } from 'cordis'
import { AgentRegistry, type Agent, type CreateAgentOptions } from '@dsh/agent'
import { AgentLoop } from '@dsh/agent-loop'
import { LlmService } from '@dsh/llm'
import { ScriptedPlugin, type Script } from '@dsh/llm-scripted'
import { SessionStore } from '@dsh/session'
import { ToolRegistry } from '@dsh/tools'

export interface HarnessOptions {
  /** The script every agent plays (inline script `test`, model spec `scripted:test`). */
  script?: Script
  persona?: string
  maxSteps?: number
}

export interface Harness {
  ctx: Context
  /** Create an agent (origin `test` unless `meta` says otherwise). */
  agent(options?: CreateAgentOptions): Promise<Agent>
  /** Load a plugin and wait until it is active. */
  plugin<C>(plugin: unknown, config?: C): Promise<void>
  dispose(): Promise<void>
}

export async function createHarness(options: HarnessOptions = {}): Promise<Harness> {
  const ctx = new Context()
  await ctx.plugin(LlmService, { model: 'scripted:test' })
  await ctx.plugin(SessionStore)
  await ctx.plugin(ToolRegistry)
  await ctx.plugin(ScriptedPlugin, { scripts: options.script ? { test: options.script } : {} })
  await ctx.plugin(AgentLoop)
  // Partial on purpose: the plugin's schema fills in the defaults.
  await ctx.plugin(AgentRegistry, {
    ...(options.persona !== undefined && { persona: options.persona }),
    ...(options.maxSteps !== undefined && { maxSteps: options.maxSteps }),
  } as AgentRegistry.Config)
  let disposal: Promise<void> | undefined
  return {
    ctx,
    agent: (agentOptions = {}) => ctx.agents.create({ ...agentOptions, meta: { origin: 'test', ...agentOptions.meta } }),
    plugin: async (plugin, config) => {
      // eslint-disable-next-line @typescript-eslint/no-explicit-any -- any plugin shape cordis accepts
      await ctx.plugin(plugin as any, config ?? {})
    },
    dispose: () => {
      disposal ??= (async () => {
        await Promise.all((ctx.get('agents')?.list() ?? []).map((agent) => agent.dispose()))
        await ctx.fiber.dispose()
      })()
      return disposal
    },
  }
}

/** The types of a session's events, in order (for turn-flow assertions). */
export function eventTypes(agent: Agent, from = 0): string[] {
  return agent.session.events(from).map((event) => event.type)
}

/**
 * Register a tool that holds its call open: `entered` resolves when the model calls it,
 * `release()` lets the call return `open`. For tests that act while a step is in a tool.
 */
export function gateTool(harness: Harness, name = 'gate'): { entered: Promise<void>; release(): void } {
  let release = () => {}
  let entered!: () => void
  const gate = { entered: new Promise<void>((resolve) => (entered = resolve)), release: () => release() }
  harness.ctx.tools.register({
    name,
    description: 'waits until the test releases it',
    parameters: { type: 'object' },
    execute: () =>
      new Promise<string>((resolve) => {
        release = () => resolve('open')
        entered()
      }),
  })
  return gate
}
