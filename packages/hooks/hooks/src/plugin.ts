import type { Context } from 'cordis'
import Schema from 'schemastery'
import type { Agent } from '@dsh/agent'
import type { ApprovalRequestInfo, SourceVerdict } from '@dsh/approvals'
import type { Session } from '@dsh/session'
import { askUpRules, readHooks, type HookEvent, type HookGroup } from './config.js'
import { agentFacts, type AgentFacts } from './agent-facts.js'
import { HookRunner, type FiredOutcome } from './fire.js'
import { readSources } from './sources.js'
import { fireSubagentEvents } from './subagents.js'

export interface HooksConfig {
  hooks: Record<string, unknown>
  claudeUserSettings: boolean
  projectClaudeSettings: boolean
  codexUserHooks: boolean
  projectCodexHooks: boolean
  passEnv: string[]
  trustedProjectFiles: Record<string, string>
}

export const name = 'hooks'
export const inject = ['approvals', 'sessions']

export const Config: Schema<HooksConfig> = Schema.object({
  hooks: Schema.dict(Schema.any()).default({}).description('Hooks in Claude Code\'s format: { PreToolUse: [{ matcher: Bash, hooks: [{ type: command, command, timeout }] }], … }.'),
  claudeUserSettings: Schema.boolean().default(false).description('Also run the hooks of ~/.claude/settings.json (your own Claude Code settings).'),
  projectClaudeSettings: Schema.boolean().default(false).description('Also run the hooks of ./.claude/settings.json and ./.claude/settings.local.json. Off by default: a project file runs commands.'),
  codexUserHooks: Schema.boolean().default(false).description('Also run the hooks of ~/.codex/hooks.json (your own Codex hooks, the same shape).'),
  projectCodexHooks: Schema.boolean().default(false).description('Also run the hooks of ./.codex/hooks.json. Off by default: a project file runs commands.'),
  passEnv: Schema.array(String).default([]).description('Variables of dsh\'s environment every hook also gets, by exact name (the allow-listed base always).'),
  trustedProjectFiles: Schema.dict(String).default({}).description('Set by the dsh CLI from `dsh trust`\'s record (a value in a config file is replaced): the project hook files trusted in this directory, by absolute path to the SHA-256 of their bytes; a project file whose bytes are not listed is not run.'),
})

/**
 * Hooks for every agent of this process: `PreToolUse` hooks are a verdict source of the
 * approval broker (`ctx.approvals`), consulted inside its decision before anyone is asked,
 * for this process's agents and for the requests its remote children forward up (so a hook
 * can refuse what the rules allow, or have it asked, and never allow what they refuse);
 * the other events are heard from the sessions
 * of the tree and the subagent lifecycle, and their hooks run without holding the run up
 * beyond their timeout.
 */
export function apply(ctx: Context, config: HooksConfig): () => Promise<void> {
  const logger = ctx.logger('hooks')
  const note = (line: string) => logger.warn(line)
  const groups: HookGroup[] = [...readHooks(config.hooks, 'the hooks entry', note), ...readSources(process.cwd(), config, note)]
  const runner = new HookRunner(groups, {
    passEnv: config.passEnv,
    note,
    transcriptOf: (id) => safely(() => ctx.sessions.locate(id)),
    record: (id, run) => {
      const session = ctx.sessions.get(id)
      if (session === undefined || session.released) return
      try {
        session.append(run)
      } catch (error) {
        logger.warn('a hook run could not be recorded in session %s: %s', id, (error as Error).message)
      }
    },
  })
  const facts = (session: Session): AgentFacts => agentFacts(session, (id) => ctx.sessions.get(id))
  /** Context given to agents and not yet seen back as their input: it fires no UserPromptSubmit (a hook's context would feed itself). */
  const injected = new Injected()
  // The agents service (@dsh/agent) is read by shape: this package does not load it.
  const agentOf = (id: string): Steerable | undefined => (ctx.get('agents') as { get(id: string): Steerable | undefined } | undefined)?.get(id)
  /** What an observing event's hooks said to the agent: context it reads at its next step, or a stop of its turn. */
  const heard = (event: HookEvent, session: Session) => (outcomes: FiredOutcome[]) => {
    try {
      actOn(event, agentOf(session.id), outcomes, injected, note)
    } catch (error) {
      // The agent went while its hooks ran (disposed, released): nothing to tell it.
      logger.debug('hooks: %s context or stop not delivered: %s', event, (error as Error).message)
    }
  }

  if (runner.has('PreToolUse')) {
    ctx.approvals.addVerdictSource({
      name: 'the PreToolUse hooks',
      askUp: askUpRules(groups),
      takes: (tool) => runner.matches('PreToolUse', tool),
      verdict: (request, agent, signal) => preToolUse(runner, request, agent, facts, signal, injected, note),
    })
  }

  // Every event but PreToolUse (whose gate waits for its hooks) runs beside the loop: the root's release waits for them.
  const needsSessions = (['PostToolUse', 'UserPromptSubmit', 'Stop', 'SessionStart', 'SessionEnd', 'SubagentStart', 'SubagentStop'] as HookEvent[]).some((event) => runner.has(event))
  if (needsSessions) {
    const unsubscribe = new Map<string, () => void>()
    ctx.effect(() => () => {
      for (const stop of unsubscribe.values()) stop()
    }, 'hooks: stop listening to sessions')
    ctx.sessions.addObserver({
      created: (session) => {
        if (unsubscribe.has(session.id)) return
        const root = session.header.parentSession === undefined
        if (root && runner.has('SessionStart')) void runner.fire('SessionStart', facts(session), { source: 'startup' }).then(heard('SessionStart', session))
        unsubscribe.set(session.id, session.subscribe((event) => {
          if (event.type === 'tool/call') runner.remember(event.call)
          else if (event.type === 'tool/result') {
            const toolFields = runner.toolFacts(event.result)
            // A call that was refused never ran: Claude Code fires PostToolUse only after a tool did.
            if (event.permission?.decision !== 'reject' && runner.matches('PostToolUse', event.result.name)) void runner.fire('PostToolUse', facts(session), toolFields, event.result.name, undefined, event.result.callId).then(heard('PostToolUse', session))
          }
          else if (event.type === 'user/message' && runner.has('UserPromptSubmit') && !injected.take(textOfMessage(event.message))) void runner.fire('UserPromptSubmit', facts(session), { prompt: textOfMessage(event.message) }).then(heard('UserPromptSubmit', session))
          else if (event.type === 'turn/end' && root && runner.has('Stop')) void runner.fire('Stop', facts(session), { stop_hook_active: false })
        }, { chunks: false }))
      },
      released: async (session) => {
        unsubscribe.get(session.id)?.()
        unsubscribe.delete(session.id)
        if (session.header.parentSession !== undefined) return
        // The root's release is awaited before dsh exits (a plugin's disposal is not): the
        // hooks still running (the last call's PostToolUse, a Stop) finish first.
        await runner.settled()
        if (runner.has('SessionEnd')) await runner.fire('SessionEnd', facts(session), { reason: 'other' })
      },
    })
  }

  if (runner.has('SubagentStart') || runner.has('SubagentStop')) fireSubagentEvents(ctx, runner, facts)
  // The observing events' runs are written when their agent is disposed, before its session
  // is released, in the order the events fired (see fire.ts): where they finish varies from
  // run to run, and a session's log must not. With no agents service nothing flushes them: not kept.
  ctx.inject(['agents'], (withAgents) => {
    runner.keepObserved = true
    withAgents.agents.onCleanup((agent) => runner.flushObserved(agent.id))
    withAgents.effect(() => () => {
      runner.keepObserved = false
    }, 'hooks: stop keeping observing runs')
  })
  // Returned, not an effect: Cordis awaits an async disposer, and dsh's exit waits for it.
  return () => runner.drain()
}

/**
 * Every matching `PreToolUse` hook on one request of the broker, a call of this process's
 * agent or one a remote child forwarded (named by its path below the agent): the strictest
 * outcome is the verdict (block, then ask, then allow).
 */
async function preToolUse(runner: HookRunner, request: ApprovalRequestInfo, agent: Agent, facts: (session: Session) => AgentFacts, signal: AbortSignal, injected: Injected, note: (line: string) => void): Promise<SourceVerdict | undefined> {
  const own = facts(agent.session)
  // A remote child's request: the agent is the one that asked, below this process's (its path is the broker's).
  const { agentType: _ownType, ...parent } = own
  const who: AgentFacts = request.child === undefined ? own : { ...parent, agentId: request.child, agentPath: request.path.join('/') }
  const outcomes = await runner.fire('PreToolUse', who, { tool_name: request.tool, tool_input: request.args }, request.tool, signal, request.callId)
  const by = (hook: string) => `PreToolUse hook "${hook}"`
  // Context and a stop are for an agent of this process; a remote child's call is only refused.
  if (request.child === undefined) {
    try {
      actOn('PreToolUse', agent, outcomes, injected, note)
    } catch {
      // The agent is going away: the call's verdict still stands.
    }
  }
  const stopped = outcomes.find((outcome) => outcome.stop !== undefined)
  if (stopped) return { verdict: 'deny', by: by(stopped.hook), reason: stopped.stop! }
  const blocked = outcomes.find((outcome) => outcome.decision === 'block')
  if (blocked) return { verdict: 'deny', by: by(blocked.hook), reason: blocked.reason ?? 'a hook blocked it' }
  const asked = outcomes.find((outcome) => outcome.decision === 'ask')
  if (asked) return { verdict: 'ask', by: by(asked.hook), ...(asked.reason !== undefined && { reason: asked.reason }) }
  const allowed = outcomes.find((outcome) => outcome.decision === 'allow')
  return allowed ? { verdict: 'allow', by: by(allowed.hook) } : undefined
}

/** An agent as this package acts on it: context for its next step, a stop of its turn. */
interface Steerable {
  inject(message: { role: 'user'; content: { type: 'text'; text: string }[] }): void
  cancel(cause?: unknown): void
}

/** Context remembered until it is seen back as input (bounded: the oldest is forgotten). */
const MAX_INJECTED = 256

/** Context given and not yet seen back as input, counted per text (the same context may be given twice). */
class Injected {
  private readonly counts = new Map<string, number>()

  add(text: string): void {
    if (!this.counts.has(text) && this.counts.size >= MAX_INJECTED) this.counts.delete(this.counts.keys().next().value!)
    this.counts.set(text, (this.counts.get(text) ?? 0) + 1)
  }

  /** Whether `text` is a context given earlier (counted off once). */
  take(text: string): boolean {
    const count = this.counts.get(text)
    if (count === undefined) return false
    if (count > 1) this.counts.set(text, count - 1)
    else this.counts.delete(text)
    return true
  }
}

/**
 * What hooks of `event` said to `agent`: `additionalContext` joins its next step as input
 * (an idle agent is not woken: it reads it with its next turn), and `continue: false` stops
 * its running turn, saying which hook and why.
 */
function actOn(event: HookEvent, agent: Steerable | undefined, outcomes: readonly FiredOutcome[], injected: Injected, note: (line: string) => void): void {
  if (agent === undefined) return
  for (const outcome of outcomes) {
    if (outcome.context === undefined) continue
    // The model is told where the text comes from.
    const text = `[context from the ${event} hook "${outcome.hook}"]\n${outcome.context}`
    injected.add(text)
    agent.inject({ role: 'user', content: [{ type: 'text', text }] })
  }
  const stopped = outcomes.find((outcome) => outcome.stop !== undefined)
  if (stopped) {
    // Said where the user reads it: the turn's end records only that it was aborted.
    note(`${event} hook "${stopped.hook}" stopped the agent (continue: false): ${stopped.stop}`)
    agent.cancel(new Error(`${event} hook "${stopped.hook}" stopped the agent: ${stopped.stop}`))
  }
}

function textOfMessage(message: { content: unknown }): string {
  if (typeof message.content === 'string') return message.content
  if (!Array.isArray(message.content)) return ''
  return message.content.flatMap((block: { type?: string; text?: string }) => (block.type === 'text' && typeof block.text === 'string' ? [block.text] : [])).join('\n')
}

function safely<T>(read: () => T): T | undefined {
  try {
    return read()
  } catch {
    // No storage (a test's store, an embedding without files): the input has no transcript_path.
    return undefined
  }
}

export default { name, inject, Config, apply }
