/**
 * The real stack for replay tests: llm, sessions, tools, the scripted and replay adapters,
 * agent loop, agents, the subagent service with spawn and fork and their tools. Only the
 * model is fake. Every session created is kept, so a test can compare whole logs.
 */
import { Context } from 'cordis'
import { AgentRegistry } from '@dsh/agent'
import { AgentLoop } from '@dsh/agent-loop'
import { LlmService, type ModelInterceptor } from '@dsh/llm'
import { ScriptedPlugin, type Script } from '@dsh/llm-scripted'
import { ReplayPlugin } from '@dsh/llm-replay'
import { SessionStore, type Session } from '@dsh/session'
import { SubagentService } from '@dsh/subagent'
import { ForkPlugin } from '@dsh/subagent-fork'
import { SpawnPlugin } from '@dsh/subagent-spawn'
import { ToolRegistry } from '@dsh/tools'
import { SubagentToolPlugin } from '@dsh/tool-subagent'

export interface StackOptions {
  model: string
  script?: Script
  record?: string
  /** Installed after the replay plugin: sees (and may wrap) what it resolved. */
  intercept?: ModelInterceptor
}

export interface Stack {
  ctx: Context
  sessions: Session[]
  /** Run one prompt in a fresh root agent; resolves with the turn's end. */
  run(prompt: string): Promise<{ reason: string; error?: string }>
  dispose(): Promise<void>
}

export async function createStack(options: StackOptions): Promise<Stack> {
  const ctx = new Context()
  await ctx.plugin(LlmService, { model: options.model })
  await ctx.plugin(SessionStore)
  await ctx.plugin(ToolRegistry)
  await ctx.plugin(ScriptedPlugin, { scripts: options.script ? { test: options.script } : {} })
  await ctx.plugin(ReplayPlugin, options.record !== undefined ? { record: options.record } : {})
  if (options.intercept) {
    const intercept = options.intercept
    await ctx.plugin({ inject: ['llm'], apply: (inner: Context) => void inner.llm.intercept(intercept) })
  }
  await ctx.plugin(AgentLoop)
  await ctx.plugin(AgentRegistry, {} as AgentRegistry.Config)
  await ctx.plugin(SubagentService)
  await ctx.plugin(SpawnPlugin)
  await ctx.plugin(ForkPlugin)
  await ctx.plugin(SubagentToolPlugin, { provider: 'spawn' })
  await ctx.plugin(SubagentToolPlugin, { provider: 'fork', toolName: 'subagent_fork' })
  const sessions: Session[] = []
  let disposal: Promise<void> | undefined
  ctx.sessions.addObserver({ created: (session) => void sessions.push(session) })
  return {
    ctx,
    sessions,
    run: async (prompt) => {
      const agent = await ctx.agents.create({ meta: { origin: 'test' } })
      try {
        const result = await agent.followup(prompt)
        return { reason: result.reason, ...(result.error !== undefined && { error: result.error }) }
      } finally {
        await agent.dispose()
      }
    },
    dispose: () => {
      disposal ??= (async () => {
        await Promise.all(ctx.agents.list().map((agent) => agent.dispose()))
        await ctx.fiber.dispose()
      })()
      return disposal
    },
  }
}

/**
 * Every session's log without what differs between runs (ids, times), keyed by lineage:
 * the root, then each child by the tool call that started it.
 */
export function normalisedLogs(sessions: readonly Session[]): Record<string, unknown[]> {
  const byId = new Map(sessions.map((session) => [session.id, session]))
  const keyOf = (session: Session): string => {
    const parent = session.header.parentSession !== undefined ? byId.get(session.header.parentSession) : undefined
    return parent ? `${keyOf(parent)}.${session.header.toolCallId ?? '?'}` : 'root'
  }
  // A delegation record names the child by its session id, which differs run to run;
  // name it by its place in the tree instead, so a replay that wires the same tree compares equal.
  const keyOfChild = (childId: string): string => {
    const child = byId.get(childId)
    return child ? keyOf(child) : `<unknown child ${childId}>`
  }
  const logs: Record<string, unknown[]> = {}
  for (const session of sessions) {
    logs[keyOf(session)] = session.ownEvents().map(({ ts: _ts, ...event }) => {
      const delegation = (event as { record?: { delegation?: { childId?: string } } }).record?.delegation
      if (delegation?.childId === undefined) return event
      const record = (event as { record: Record<string, unknown> }).record
      return { ...event, record: { ...record, delegation: { ...delegation, childId: keyOfChild(delegation.childId) } } }
    })
  }
  return logs
}
