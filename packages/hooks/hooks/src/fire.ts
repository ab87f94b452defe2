/**
 * Firing one event: the groups configured for it whose matcher takes the tool, each of
 * their commands run in parallel (as Claude Code runs them) with the event's JSON on
 * standard input, each outcome read. Every problem is one note naming the hook; none fails
 * the run.
 */
import type { ToolCallBlock, ToolResultBlock } from '@dsh/llm'
import type { SessionEventBody } from '@dsh/session'
import { matchesTool, type HookEvent, type HookGroup } from './config.js'
import type { AgentFacts } from './agent-facts.js'
import { outcomeOf, type HookOutcome } from './outcome.js'
import { runHookCommand } from './runner.js'

export interface FiredOutcome extends HookOutcome {
  /** The command, as configured. */
  hook: string
}

export interface HookRunnerOptions {
  passEnv: readonly string[]
  note: (line: string) => void
  /** The file a session is stored in, for `transcript_path` (none without storage). */
  transcriptOf: (sessionId: string) => string | undefined
  /** Records one run in a session (a `hook/run` event); never throws. */
  record?: (sessionId: string, run: HookRunRecord) => void
}

/**
 * Events whose runs are recorded as they finish: those the turn waits for, so each lands at
 * its place in the log. The other (observing) events run beside the loop: their runs are
 * kept per session and written when its agent is disposed (`flushObserved`), in the order
 * the events fired, so a session's log is the same from run to run.
 */
const RECORDED_AT_ONCE: ReadonlySet<HookEvent> = new Set(['PreToolUse'])
/** Observing fires kept per session until its agent goes; beyond it the oldest are not recorded. */
const MAX_OBSERVED_FIRES = 1_024

type HookRunRecord = Extract<SessionEventBody, { type: 'hook/run' }>
const MAX_NOTE_CHARS = 300
/** Events whose plain standard output is context for the model (Claude Code's reading). */
const CONTEXT_FROM_PLAIN_OUTPUT: ReadonlySet<HookEvent> = new Set(['UserPromptSubmit', 'SessionStart'])

/** Calls whose results are not back yet, for `PostToolUse`'s `tool_input`: bounded, oldest dropped. */
const MAX_REMEMBERED_CALLS = 1_024
const MAX_RESPONSE_CHARS = 16 * 1024

export class HookRunner {
  private readonly calls = new Map<string, unknown>()
  private readonly stopping = new AbortController()
  /** Runs not finished yet: what `drain` waits for. */
  private readonly running = new Set<Promise<unknown>>()
  /** Observing fires by the session they are recorded in, in firing order, until `flushObserved` (only once `keepObserved` is on). */
  private readonly observed = new Map<string, Promise<HookRunRecord[]>[]>()
  /** Set once something will flush the observing runs (the agents' disposal): before that they are not kept. */
  keepObserved = false

  constructor(
    private readonly groups: readonly HookGroup[],
    private readonly options: HookRunnerOptions,
  ) {}

  has(event: HookEvent): boolean {
    return this.groups.some((group) => group.event === event)
  }

  /** Whether any hook of `event` takes `tool` (cheap: no input is built for a call no hook wants). */
  matches(event: HookEvent, tool?: string): boolean {
    return this.groups.some((group) => group.event === event && (tool === undefined || matchesTool(group, tool)))
  }

  remember(call: ToolCallBlock): void {
    if (!this.has('PostToolUse')) return
    if (this.calls.size >= MAX_REMEMBERED_CALLS) this.calls.delete(this.calls.keys().next().value!)
    this.calls.set(call.id, call.args)
  }

  /** `PostToolUse`'s fields for a result: the call's input (when it was seen) and what the tool answered. */
  toolFacts(result: ToolResultBlock): Record<string, unknown> {
    const input = this.calls.get(result.callId)
    this.calls.delete(result.callId)
    const text = result.content.flatMap((block) => (block.type === 'text' ? [block.text] : [])).join('\n')
    return { tool_name: result.name, tool_input: input ?? {}, tool_response: { output: text.slice(0, MAX_RESPONSE_CHARS), is_error: result.isError === true } }
  }

  /**
   * Run the hooks of `event` (those matching `tool`, for a tool event) and read their
   * outcomes. Never rejects. Outcomes other than `PreToolUse`'s are not acted on yet: a
   * hook of such an event that blocks is a note saying so.
   */
  async fire(event: HookEvent, facts: AgentFacts, fields: Record<string, unknown>, tool?: string, signal?: AbortSignal, callId?: string, recordIn = facts.sessionId): Promise<FiredOutcome[]> {
    const hooks = this.groups.filter((group) => group.event === event && (tool === undefined || matchesTool(group, tool))).flatMap((group) => group.hooks)
    if (hooks.length === 0) return []
    const transcript = this.options.transcriptOf(facts.sessionId)
    const input = {
      session_id: facts.rootSessionId,
      ...(transcript !== undefined && { transcript_path: transcript }),
      cwd: facts.cwd,
      hook_event_name: event,
      ...fields,
      agent_id: facts.agentId,
      ...(facts.agentType !== undefined && { agent_type: facts.agentType }),
      agent_path: facts.agentPath,
    }
    const stop = signal === undefined ? this.stopping.signal : AbortSignal.any([signal, this.stopping.signal])
    const atOnce = RECORDED_AT_ONCE.has(event)
    const records: HookRunRecord[] = []
    const all = Promise.all(
      hooks.map(async (hook, index): Promise<FiredOutcome> => {
        const started = performance.now()
        const run = await runHookCommand(hook.command, input, { cwd: facts.cwd, timeoutMs: hook.timeoutMs, passEnv: this.options.passEnv, signal: stop })
        const outcome = { ...outcomeOf(run, hook.command, CONTEXT_FROM_PLAIN_OUTPUT.has(event)), hook: hook.command }
        if (this.options.record !== undefined) {
          const record: HookRunRecord = {
            type: 'hook/run',
            event,
            command: hook.command,
            ...(run.exitCode !== undefined && { exitCode: run.exitCode }),
            durationMs: Math.round(performance.now() - started),
            ...(outcome.decision !== undefined && { decision: outcome.decision }),
            ...(callId !== undefined && { callId }),
            ...(outcome.note !== undefined && { note: outcome.note.slice(0, MAX_NOTE_CHARS) }),
          }
          if (atOnce) this.options.record(recordIn, record)
          // By the hook's place in the configuration, not by which finished first.
          else records[index] = record
        }
        if (outcome.note !== undefined) this.options.note(`${hook.from}: ${event} ${outcome.note}`)
        if (event !== 'PreToolUse' && outcome.decision === 'block') this.options.note(`${hook.from}: ${event} hook "${hook.command}" blocks, which dsh does not act on for ${event} yet: ${outcome.reason ?? ''}`.trim())
        return outcome
      }),
    )
    this.running.add(all)
    if (!atOnce && this.keepObserved && this.options.record !== undefined) this.keep(recordIn, all.then(() => records.filter((record) => record !== undefined)))
    try {
      return await all
    } finally {
      this.running.delete(all)
    }
  }

  private keep(sessionId: string, fired: Promise<HookRunRecord[]>): void {
    const fires = this.observed.get(sessionId) ?? []
    if (fires.length === 0) this.observed.set(sessionId, fires)
    if (fires.length >= MAX_OBSERVED_FIRES) fires.shift()
    fires.push(fired)
  }

  /**
   * Record the observing runs of `sessionId` (waiting for those still running, each bounded
   * by its timeout) in the order their events fired, and forget them; `undefined` at once
   * when the session had none (an agent without hooks pays nothing at its disposal).
   */
  flushObserved(sessionId: string): Promise<void> | undefined {
    const fires = this.observed.get(sessionId)
    if (fires === undefined) return undefined
    this.observed.delete(sessionId)
    return Promise.all(fires).then((lists) => {
      for (const run of lists.flat()) this.options.record?.(sessionId, run)
    })
  }

  /**
   * Wait for the hooks still running (each bounded by its timeout), then stop anything
   * left: the plugin is stopping, and an audit hook fired by the last call of a run should
   * still write its line before dsh exits.
   */
  async drain(): Promise<void> {
    await this.settled()
    this.stopping.abort()
  }

  /** Resolves once every hook running now has finished (each is bounded by its timeout). */
  async settled(): Promise<void> {
    await Promise.allSettled([...this.running])
  }
}
