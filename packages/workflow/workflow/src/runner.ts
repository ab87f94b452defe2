/**
 * One run of a workflow: its `agent()` calls as delegations through `ctx.subagents.start`
 * under one root agent (so the tree's cap, budgets, approvals, hooks, tracing and the live
 * tree apply as to any child), each recorded in the root session by its key, and reused
 * from there when the run is a resume.
 */
import { setMaxListeners } from 'node:events'
import type { Context } from 'cordis'
import { serviceInstance, type Agent } from '@dsh/agent'
import type { AgentDefinition } from '@dsh/agent-definitions'
import { errorMessage, isRecord } from '@dsh/base'
import { outputText } from '@dsh/llm'
import { SubagentError, type SubagentProvider, type SubagentResult, type SubagentUsage, type SubagentWorkspaceReport } from '@dsh/subagent'
import { generalChild, helperRequest, helperUnavailable, withTimeout, type HelperToolSettings } from '@dsh/tool-subagent'
import { WorkflowError } from './errors.js'
import { Journal, type CallRecord, type JournalReading } from './journal.js'
import { callKey } from './keys.js'
import type { LoadedWorkflow } from './load.js'
import { remoteSideEffectsOf, sideEffectsOf } from './side-effects.js'
import { bestOf, type BestOfAttempt, type BestOfOptions, type BestOfResult } from './best-of.js'

export interface AgentCallOptions {
  /** A JSON schema: the child returns `structured` output matching it (a provider with `outputSchema`: spawn, fork). */
  schema?: Record<string, unknown>
  /** A workspace of the child's own (`@dsh/workspaces` must be composed). */
  workspace?: 'worktree' | 'copy'
  model?: string
  /** What the live tree and the record call it (default: the helper's name). */
  label?: string
  /** On a resume, run this call again even though its child had side effects outside a workspace. */
  rerunSideEffects?: boolean
}

export interface AgentAnswer {
  text: string
  structured?: unknown
  usage: SubagentUsage
  /** The child's session (its run id for a child kept elsewhere). */
  sessionId: string
  /** Taken from the record of an earlier run of this workflow (`--resume`), not run again. */
  reused: boolean
  /** What it changed in its workspace, when it had one. */
  workspace?: SubagentWorkspaceReport
}

export interface WorkflowApi {
  agent(helperOrProvider: string, prompt: string, options?: AgentCallOptions): Promise<AgentAnswer>
  parallel<T, R>(items: Iterable<T>, fn: (item: T, index: number) => Promise<R> | R, options?: { concurrency?: number }): Promise<R[]>
  bestOf(attempts: number | readonly BestOfAttempt[], options?: BestOfOptions): Promise<BestOfResult>
  /** A line on the progress output (stderr, or above the live tree). */
  log(line: string): void
}

export interface WorkflowSettings {
  /** The composed subagent tool's ceiling (its `toolFilter` and `maxDepth`): a helper here runs under it as it would there. */
  toolSettings: Pick<HelperToolSettings, 'maxDepth' | 'toolFilter'>
  /** `tree.maxConcurrent` of the composed `@dsh/subagent`. */
  treeCap?: number
  /** The most `agent()` calls running at once in this workflow (`--max-concurrent`), besides the tree's cap. */
  maxConcurrent?: number
  /** `tree.budget.wallTimeMs`: the workflow is stopped when it has not returned by then. */
  wallTimeMs?: number
  /** The earlier runs' record, when resuming. */
  resumed?: JournalReading
  /** The workflow's own `options.rerunSideEffects`. */
  rerunSideEffects?: boolean
  warn(line: string): void
}

export interface WorkflowOutcome {
  value?: unknown
  error?: unknown
  calls: { run: number; reused: number; failed: number }
  /** The calls that finished in this run or were reused, in the order they finished. */
  finished: Array<{ label: string; key: string; text: string; structured?: unknown }>
}

const NO_USAGE: SubagentUsage = { inputTokens: 0, outputTokens: 0, cachedInputTokens: 0 }

/** A counting semaphore: at most `size` holders. */
export class Slots {
  private held = 0
  private readonly waiting: Array<() => void> = []
  constructor(private readonly size: number) {}
  async acquire(): Promise<() => void> {
    if (this.held >= this.size) await new Promise<void>((resolve) => this.waiting.push(resolve))
    else this.held++
    let released = false
    return () => {
      if (released) return
      released = true
      const next = this.waiting.shift()
      if (next) next()
      else this.held--
    }
  }
}

export class WorkflowRunner {
  readonly api: WorkflowApi
  private readonly stopper = new AbortController()
  private stopError: unknown
  private readonly stopped: Promise<never>
  private readonly inFlight = new Set<Promise<unknown>>()
  private readonly occurrences = new Map<string, number>()
  private readonly global: Slots | undefined
  private capSaid = false
  private readonly outcome: WorkflowOutcome = { calls: { run: 0, reused: 0, failed: 0 }, finished: [] }
  // The services themselves, looked up once: each access through a Cordis proxy costs a traced
  // wrapper, and a run of a thousand calls would pay it on every call (as @dsh/tool-subagent does).
  private readonly subagents: Context['subagents']
  private readonly sessions: Context['sessions']
  private readonly definitions: readonly AgentDefinition[]
  private readonly requestContext: Context

  constructor(
    readonly ctx: Context,
    readonly root: Agent,
    readonly journal: Journal,
    readonly settings: WorkflowSettings,
  ) {
    this.stopped = new Promise<never>((_, reject) => this.stopper.signal.addEventListener('abort', () => reject(this.stopError), { once: true }))
    this.stopped.catch(() => {})
    // Every child of the run listens to this one signal: a fan-out of hundreds is expected, not a leak.
    setMaxListeners(0, this.stopper.signal)
    this.subagents = serviceInstance(ctx.subagents)
    this.sessions = serviceInstance(ctx.sessions)
    this.definitions = ctx.get('agentDefinitions')?.list() ?? []
    this.requestContext = cachedServices(ctx, { subagents: this.subagents, tools: serviceInstance(ctx.tools) })
    this.global = settings.maxConcurrent !== undefined ? new Slots(settings.maxConcurrent) : undefined
    this.api = {
      agent: (name, prompt, options) => this.agent(name, prompt, options ?? {}),
      parallel: (items, fn, options) => this.parallel(items, fn, options ?? {}),
      bestOf: (attempts, options) => bestOf(this, attempts, options ?? {}),
      log: (line) => settings.warn(String(line)),
    }
  }

  get signal(): AbortSignal {
    return this.stopper.signal
  }

  /** Stop the workflow: every call in flight is cancelled, none starts, and the run ends with `error`. */
  stop(error: unknown): void {
    if (this.stopper.signal.aborted) return
    this.stopError = error
    this.stopper.abort(error)
  }

  async run(workflow: LoadedWorkflow): Promise<WorkflowOutcome> {
    const { wallTimeMs } = this.settings
    const timer =
      wallTimeMs === undefined
        ? undefined
        : setTimeout(() => this.stop(new WorkflowError('WALL_TIME', `the workflow did not return within the tree's wall time (tree.budget.wallTimeMs, ${wallTimeMs} ms), so it was stopped`)), wallTimeMs)
    try {
      this.outcome.value = await Promise.race([Promise.resolve().then(() => workflow.run(this.api)), this.stopped])
    } catch (error) {
      this.outcome.error = this.stopper.signal.aborted ? this.stopError : error
    } finally {
      if (timer) clearTimeout(timer)
      // Whatever the workflow left running is cancelled and waited for: no child, process or workspace outlives the run.
      if (this.inFlight.size > 0) {
        if (!this.stopper.signal.aborted) this.stop(this.outcome.error ?? new WorkflowError('CANCELLED', 'the workflow returned while calls it started were still running; they were cancelled'))
        await Promise.allSettled([...this.inFlight])
      }
    }
    return this.outcome
  }

  /** What `agent()` runs: a helper by name, else a plain child of a provider. */
  private resolve(name: string): { definition: AgentDefinition; provider: SubagentProvider; general: boolean } {
    if (typeof name !== 'string' || name === '') throw new WorkflowError('INVALID_CALL', 'agent(): the first argument names a helper or a provider (a non-empty string)')
    const { definitions } = this
    const definition = definitions.find((candidate) => candidate.name === name)
    if (definition !== undefined) {
      const provider = this.subagents.getProvider(definition.provider)
      const unavailable = helperUnavailable(definition, provider)
      if (unavailable !== undefined) throw new WorkflowError('INVALID_CALL', `agent("${name}"): the helper cannot run here: ${unavailable} (${definition.source.file})`)
      return { definition, provider: provider!, general: false }
    }
    const provider = this.subagents.getProvider(name)
    if (provider !== undefined) return { definition: generalChild({ toolName: 'workflow', provider: name }), provider, general: true }
    const helpers = definitions.map((candidate) => candidate.name)
    throw new WorkflowError(
      'UNKNOWN_HELPER',
      `agent("${name}"): there is no helper or provider named "${name}"; helpers: ${helpers.length > 0 ? helpers.join(', ') : 'none (define them in ./.dsh/agents/*.md)'}; providers: ${this.subagents.list().join(', ')}`,
    )
  }

  async agent(name: string, prompt: string, options: AgentCallOptions, internal: { fresh?: boolean } = {}): Promise<AgentAnswer> {
    if (this.stopper.signal.aborted) throw this.stopError
    const { definition, provider, general } = this.resolve(name)
    if (typeof prompt !== 'string' || prompt.trim() === '') throw new WorkflowError('INVALID_CALL', `agent("${name}"): the prompt must be a non-empty string`)
    if (!isRecord(options as unknown)) throw new WorkflowError('INVALID_CALL', `agent("${name}"): options must be an object`)
    if (options.schema !== undefined && !isRecord(options.schema)) throw new WorkflowError('INVALID_CALL', `agent("${name}"): schema must be a JSON schema object`)
    if (options.schema !== undefined && !provider.capabilities.outputSchema) throw new WorkflowError('INVALID_CALL', `agent("${name}"): provider "${provider.name}" cannot return structured output; run the helper on spawn or fork, or drop schema`)
    if (options.workspace !== undefined && options.workspace !== 'worktree' && options.workspace !== 'copy') throw new WorkflowError('INVALID_CALL', `agent("${name}"): workspace is "worktree" or "copy"`)
    // The model the call names (its own or its helper's), not the run's default: a replay
    // (--model replay:DIR) finds each child by its call id, so the key must not change with it.
    const model = options.model ?? definition.model ?? ''
    const workspace = options.workspace ?? (definition.workspace === 'worktree' || definition.workspace === 'copy' ? definition.workspace : undefined)
    const key = callKey({ definitionHash: general ? '' : definition.source.hash, provider: provider.name, model, prompt, options: { schema: options.schema, workspace } })
    const occurrence = this.occurrences.get(key) ?? 0
    this.occurrences.set(key, occurrence + 1)
    const callId = `wf-${key.slice(0, 16)}-${occurrence}`
    const label = options.label ?? name
    const earlier = internal.fresh ? undefined : this.settings.resumed?.completed.get(key)?.[occurrence]
    if (earlier !== undefined) {
      if (!earlier.sideEffects?.length) return this.reuse(callId, earlier, label)
      if (options.rerunSideEffects !== true && this.settings.rerunSideEffects !== true) {
        const error = new WorkflowError(
          'SIDE_EFFECTS',
          `the call agent("${name}") labelled "${label}" (key ${key.slice(0, 12)}) finished in the earlier run, but its child had side effects outside a workspace (${earlier.sideEffects.slice(0, 3).join('; ')}${earlier.sideEffects.length > 3 ? `; ${earlier.sideEffects.length - 3} more` : ''}); it is not reused silently: pass { rerunSideEffects: true } to that agent() call (or export const options = { rerunSideEffects: true }) to run it again`,
        )
        this.stop(error)
        throw error
      }
      this.settings.warn(`workflow: running "${label}" again: it had side effects outside a workspace in the earlier run (rerunSideEffects)`)
    }
    const call = this.start(name, prompt, { definition, provider, general }, { ...options, workspace }, { key, callId, label, model })
    this.inFlight.add(call)
    try {
      return await call
    } finally {
      this.inFlight.delete(call)
    }
  }

  private reuse(callId: string, record: CallRecord, label: string): AgentAnswer {
    this.journal.started('agent', callId, { key: record.key, label, reused: true })
    this.journal.ended(callId, { ...record, reused: true } as CallRecord)
    this.outcome.calls.reused++
    this.outcome.finished.push({ label, key: record.key, text: record.text, ...(record.structured !== undefined && { structured: record.structured }) })
    return { text: record.text, ...(record.structured !== undefined && { structured: record.structured }), usage: record.usage ?? NO_USAGE, sessionId: record.sessionId ?? '', reused: true }
  }

  private async start(
    name: string,
    prompt: string,
    target: { definition: AgentDefinition; provider: SubagentProvider; general: boolean },
    options: AgentCallOptions,
    call: { key: string; callId: string; label: string; model: string },
  ): Promise<AgentAnswer> {
    const release = await this.global?.acquire()
    try {
      if (this.stopper.signal.aborted) throw this.stopError
      const { definition, provider, general } = target
      this.journal.started('agent', call.callId, { key: call.key, helper: name, provider: provider.name, ...(call.model !== '' && { model: call.model }), label: call.label, prompt, ...(options.schema && { schema: options.schema }), ...(options.workspace && { workspace: options.workspace }) })
      const request = helperRequest(this.requestContext, definition, provider, { prompt, label: call.label, parent: this.root, signal: this.stopper.signal, callId: call.callId, general }, this.settings.toolSettings)
      if (options.model !== undefined) request.agentOptions = { model: options.model }
      if (options.schema !== undefined) request.outputSchema = options.schema
      if (options.workspace !== undefined) request.workspace = options.workspace
      let result: SubagentResult
      let sessionId: string
      let sideEffects: string[] = []
      try {
        const started = await this.subagents.start(provider.name, request)
        const run = definition.timeoutMs === undefined ? started : withTimeout(started, definition.timeoutMs)
        sessionId = run.id
        try {
          result = await run.result
          if (run.local) sideEffects = await sideEffectsOf(this.sessions, run.id)
        } finally {
          await run.dispose()
        }
        // A child in another process has written its session once it is closed.
        if (!run.local) sideEffects = await remoteSideEffectsOf(this.sessions, this.root.session, run.id, result.workspace !== undefined)
      } catch (error) {
        const failure = this.callError(name, call.label, error)
        this.journal.ended(call.callId, { kind: 'agent', key: call.key, label: call.label, stopReason: 'error', text: '' }, failure instanceof Error ? failure.message : String(failure))
        this.outcome.calls.failed++
        throw failure
      }
      const text = outputText(result.output)
      const record: CallRecord = {
        kind: 'agent',
        key: call.key,
        label: call.label,
        stopReason: result.stopReason,
        text,
        ...(result.structured !== undefined && { structured: result.structured }),
        ...(result.usage && { usage: result.usage }),
        sessionId,
        ...(sideEffects.length > 0 && { sideEffects }),
      }
      if (result.stopReason !== 'completed') {
        const failure = this.stopFailure(name, call.label, result)
        this.journal.ended(call.callId, record, failure.message)
        this.outcome.calls.failed++
        throw failure
      }
      if (options.schema !== undefined && result.structured === undefined) {
        const failure = new WorkflowError('CALL_FAILED', `agent("${name}") "${call.label}": its child finished without the structured output its schema asks for (it never called structured_output)`)
        this.journal.ended(call.callId, record, failure.message)
        this.outcome.calls.failed++
        throw failure
      }
      this.journal.ended(call.callId, record)
      this.outcome.calls.run++
      this.outcome.finished.push({ label: call.label, key: call.key, text, ...(result.structured !== undefined && { structured: result.structured }) })
      return { text, ...(result.structured !== undefined && { structured: result.structured }), usage: result.usage ?? NO_USAGE, sessionId, reused: false, ...(result.workspace && { workspace: result.workspace }) }
    } finally {
      release?.()
    }
  }

  /** A start or run that failed: the workflow's stop when it caused it, a budget stop that ends the workflow, else the call's own error. */
  private callError(name: string, label: string, error: unknown): unknown {
    if (this.stopper.signal.aborted) return this.stopError
    if (error instanceof SubagentError && error.code === 'BUDGET') {
      const budget = new WorkflowError('BUDGET', `the delegation tree's budget is spent (${error.message}); agent("${name}") "${label}" could not start`)
      this.stop(budget)
      return budget
    }
    return new WorkflowError('CALL_FAILED', `agent("${name}") "${label}" could not be started: ${errorMessage(error)}`, { cause: error })
  }

  private stopFailure(name: string, label: string, result: SubagentResult): WorkflowError {
    if (this.stopper.signal.aborted && this.stopError instanceof WorkflowError) return this.stopError
    if (result.stopReason === 'budget') {
      const budget = new WorkflowError('BUDGET', `agent("${name}") "${label}" was stopped by a budget: ${result.diagnostic ?? 'budget spent'}`)
      this.stop(budget)
      return budget
    }
    return new WorkflowError('CALL_FAILED', `agent("${name}") "${label}": its child ended ${result.stopReason}${result.diagnostic ? `: ${result.diagnostic}` : ''}`)
  }

  async parallel<T, R>(items: Iterable<T>, fn: (item: T, index: number) => Promise<R> | R, options: { concurrency?: number }): Promise<R[]> {
    if (items === null || typeof (items as Iterable<T>)[Symbol.iterator] !== 'function') throw new WorkflowError('INVALID_CALL', 'parallel(items, fn): items must be iterable (an array)')
    if (typeof fn !== 'function') throw new WorkflowError('INVALID_CALL', 'parallel(items, fn): fn must be a function')
    const list = [...items]
    const asked = options.concurrency ?? this.settings.treeCap ?? 8
    if (!Number.isInteger(asked) || asked < 1) throw new WorkflowError('INVALID_CALL', `parallel(): concurrency must be a whole number of at least 1 (got ${String(options.concurrency)})`)
    let concurrency = asked
    const cap = Math.min(this.settings.treeCap ?? Infinity, this.settings.maxConcurrent ?? Infinity)
    if (asked > cap) {
      concurrency = cap
      if (!this.capSaid) {
        this.capSaid = true
        this.settings.warn(`workflow: parallel() asks for concurrency ${asked}, above the tree's cap of ${cap} (tree.maxConcurrent / --max-concurrent): at most ${cap} run at once`)
      }
    }
    const results = new Array<R>(list.length)
    let next = 0
    let failed = false
    let firstError: unknown
    const worker = async () => {
      while (!failed && next < list.length && !this.stopper.signal.aborted) {
        const index = next++
        try {
          results[index] = await fn(list[index]!, index)
        } catch (error) {
          if (!failed) [failed, firstError] = [true, error]
        }
      }
    }
    await Promise.all(Array.from({ length: Math.min(concurrency, list.length) }, worker))
    if (failed) throw firstError
    if (this.stopper.signal.aborted) throw this.stopError
    return results
  }

  /** Count a bestOf's record (its own calls are counted as they finish). */
  recordBestOf(callId: string, record: CallRecord, error?: string): void {
    this.journal.ended(callId, record, error)
  }
}

/**
 * `ctx` as `helperRequest` reads it, with the services it asks for on every call looked up
 * once (`ctx.get(name)` included); anything else goes to `ctx` itself.
 */
function cachedServices(ctx: Context, services: Record<string, unknown>): Context {
  const got = new Map<string, unknown>()
  const get = (name: string): unknown => {
    if (!got.has(name)) {
      const service = ctx.get(name as never) as object | undefined
      got.set(name, service === undefined ? undefined : serviceInstance(service))
    }
    return got.get(name)
  }
  return new Proxy(ctx, {
    get: (target, prop) => (typeof prop === 'string' && Object.hasOwn(services, prop) ? services[prop] : prop === 'get' ? get : Reflect.get(target, prop)),
  })
}
