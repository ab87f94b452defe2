import { setMaxListeners } from 'node:events'
import { errorMessage } from '@dsh/base'
import { Context, Service } from 'cordis'
import type { TextBlock, ToolCallBlock, ToolResultBlock, ToolSpec } from '@dsh/llm'
import { ToolError } from './errors.js'
import type { ToolAgent, ToolCallOutcome, ToolDefinition, ToolExecution, ToolFilter, ToolOutput, ToolPermissionDecision, ToolPermissionGate } from './types.js'
import { ToolArguments } from './validation.js'

declare module 'cordis' {
  interface Context {
    tools: ToolRegistry
    /** Set on an agent's own context: registrations made through it belong to that agent only. */
    [AGENT_SCOPE]?: string
  }
}

/** A claimed tool name; `register` fills it (the definition's name is the reserved one). */
export interface ToolReservation {
  readonly name: string
  register<Args>(definition: Omit<ToolDefinition<Args>, 'name'>): () => void
}

/** Marks a context as an agent's own (value: the agent id); see `ToolRegistry.register`. */
export const AGENT_SCOPE = Symbol.for('dsh.tools.agentScope')

const TOOL_NAME = /^[A-Za-z0-9_-]{1,64}$/

/** The spec-cache key of agents with neither scoped tools nor filters (not a valid agent id). */
const GLOBAL_VIEW = '\0global'

interface Entry {
  definition: ToolDefinition
  args: ToolArguments
}

/** What one agent sees, computed once per registry version (see `viewOf`). */
interface ToolView {
  version: number
  /** Visible names, sorted. */
  names: readonly string[]
  specs: ToolSpec[]
}

/**
 * `ctx.tools`: the tool registry and the execution pipeline.
 *
 * Tools registered through a plain context are visible to every agent; tools registered
 * through an agent's own context (`agent.ctx`) exist only for that agent. Restrictions
 * are per agent and live: a later registration is filtered as well.
 */
export class ToolRegistry extends Service {
  private global = new Map<string, Entry>()
  private scoped = new Map<string, Map<string, Entry>>()
  private filters = new Map<string, ToolFilter[]>()
  /** Global names claimed ahead of registration, by claim token. */
  private reserved = new Map<string, symbol>()
  /** Bumped on every change; visible-tool lists are cached against it. */
  private version = 0
  private viewCache = new Map<string, ToolView>()
  /** Asked in order before a side-effecting call runs (see `addPermissionGate`). */
  private gates: ToolPermissionGate[] = []
  /** Gates that also want some calls of tools without side effects (`addPermissionGate`'s `alsoFor`). */
  private readonly alsoFor = new Map<ToolPermissionGate, (tool: string, agent: ToolAgent) => boolean>()

  constructor(ctx: Context) {
    super(ctx, 'tools')
  }

  /**
   * Claim a global tool name now, for a tool registered later (a tool that exists only
   * while something else does, like the subagent tool and its provider). A taken name
   * throws `DUPLICATE_TOOL` at once, so a clash is reported when the plugin loads rather
   * than when the tool finally registers. The claim is an effect of the calling plugin.
   */
  reserve(name: string): ToolReservation {
    if (!TOOL_NAME.test(name)) throw new ToolError('INVALID_TOOL', `tool name ${JSON.stringify(name)} must be 1-64 letters, digits, "_" or "-"`)
    if (this.global.has(name) || this.reserved.has(name)) {
      throw new ToolError('DUPLICATE_TOOL', `a tool named "${name}" is already registered or reserved; give each tool (each subagent tool instance) its own name`)
    }
    const ctx = this.ctx
    const token = Symbol(name)
    ctx.effect(() => {
      this.reserved.set(name, token)
      return () => {
        if (this.reserved.get(name) === token) this.reserved.delete(name)
      }
    }, `tools.reserve(${JSON.stringify(name)})`)
    return {
      name,
      register: (definition) => this.registerIn(ctx, { ...definition, name } as ToolDefinition, undefined, token),
    }
  }

  register<Args>(definition: ToolDefinition<Args>): () => void {
    return this.registerIn(this.ctx, definition as ToolDefinition, this.ctx[AGENT_SCOPE])
  }

  private registerIn(ctx: Context, definition: ToolDefinition, scope: string | undefined, token?: symbol): () => void {
    const name = definition.name
    if (!TOOL_NAME.test(name)) throw new ToolError('INVALID_TOOL', `tool name ${JSON.stringify(name)} must be 1-64 letters, digits, "_" or "-"`)
    if (typeof definition.execute !== 'function') throw new ToolError('INVALID_TOOL', `tool "${name}" has no execute function`)
    const parameters = definition.parameters
    if (typeof parameters !== 'object' || parameters === null || Array.isArray(parameters)) {
      throw new ToolError('INVALID_TOOL', `tool "${name}": parameters must be a JSON Schema object`)
    }
    if (this.global.has(name) || (scope !== undefined && this.scoped.get(scope)?.has(name))) {
      throw new ToolError('DUPLICATE_TOOL', `a tool named "${name}" is already registered${scope ? ` for agent ${scope}` : ''}; give each tool its own name`)
    }
    const claim = this.reserved.get(name)
    if (claim !== undefined && claim !== token) throw new ToolError('DUPLICATE_TOOL', `the tool name "${name}" is reserved by another plugin; give each tool its own name`)
    const entry: Entry = { definition, args: new ToolArguments(name, parameters) }
    const label = `tools.register(${JSON.stringify(name)})`
    return ctx.effect(() => {
      const table = scope === undefined ? this.global : this.scopeTable(scope)
      table.set(name, entry)
      this.version++
      return () => {
        if (table.get(name) !== entry) return
        table.delete(name)
        if (scope !== undefined && table.size === 0) this.scoped.delete(scope)
        this.version++
      }
    }, label)
  }

  /**
   * Limit what `agentId` sees and may call. Unknown names throw now, so a typo never
   * silently widens or narrows a child's tools. Returns a disposer that lifts the filter.
   */
  restrict(agentId: string, filter: ToolFilter): () => void {
    const { allow, deny } = filter
    if (allow === undefined && deny === undefined) throw new ToolError('INVALID_FILTER', 'a tool filter needs `allow` or `deny`')
    const known = new Set(this.namesFor(agentId, false))
    for (const name of [...(allow ?? []), ...(deny ?? [])]) {
      if (!known.has(name)) {
        throw new ToolError('UNKNOWN_TOOL', `tool filter names "${name}", which is not registered (known: ${[...known].join(', ') || 'none'})`)
      }
    }
    const frozen: ToolFilter = { allow: allow && [...allow], deny: deny && [...deny] }
    return this.ctx.effect(() => {
      this.filters.set(agentId, [...(this.filters.get(agentId) ?? []), frozen])
      this.version++
      return () => {
        const rest = (this.filters.get(agentId) ?? []).filter((entry) => entry !== frozen)
        if (rest.length) this.filters.set(agentId, rest)
        else this.filters.delete(agentId)
        this.version++
      }
    }, `tools.restrict(${agentId})`)
  }

  /**
   * Put every call of a side-effecting tool to `gate` before it runs. This is the
   * extension point front ends use to ask their user (`dsh acp` asks its ACP client);
   * the gate is an effect of the calling plugin and goes with it. Gates are asked in the
   * order they were added: the first rejection stops the call, and the first allowing
   * answer is the one recorded. Returns a disposer that removes the gate. `alsoFor` names
   * tools without side effects whose calls this gate is asked about too (the approval
   * broker's `PreToolUse` hooks on `read`); it is asked per such call, so keep it cheap.
   */
  addPermissionGate(gate: ToolPermissionGate, options: { alsoFor?: (tool: string, agent: ToolAgent) => boolean } = {}): () => void {
    if (typeof gate !== 'function') throw new ToolError('INVALID_TOOL', 'a permission gate must be a function')
    const { alsoFor } = options
    return this.ctx.effect(() => {
      this.gates.push(gate)
      if (alsoFor) this.alsoFor.set(gate, alsoFor)
      return () => {
        this.gates = this.gates.filter((entry) => entry !== gate)
        this.alsoFor.delete(gate)
      }
    }, 'tools.addPermissionGate()')
  }

  /** Names visible to `agentId` (all global names when omitted). */
  list(agentId?: string): string[] {
    return agentId === undefined ? [...this.global.keys()] : this.namesFor(agentId, true)
  }

  get(name: string, agentId?: string): ToolDefinition | undefined {
    return this.lookup(name, agentId)?.definition
  }

  /** The model-facing specs for `agentId`, cached until the registry changes. */
  specsFor(agentId: string): ToolSpec[] {
    return this.viewOf(agentId).specs
  }

  /**
   * The names visible to `agentId`, sorted. The same array is returned until the registry
   * changes, so a caller may compare it by identity to know whether anything it derived
   * from the list (a composed system prompt) is still current. Do not mutate it.
   */
  visibleNames(agentId: string): readonly string[] {
    return this.viewOf(agentId).names
  }

  /** Drop per-agent state (scoped tools are removed with the agent's context; this drops caches). */
  forgetAgent(agentId: string): void {
    this.viewCache.delete(agentId)
  }

  private viewOf(agentId: string): ToolView {
    // Most agents (every plain child of a fan-out) see exactly the global tools: share one view.
    const key = this.scoped.has(agentId) || this.filters.has(agentId) ? agentId : GLOBAL_VIEW
    const cached = this.viewCache.get(key)
    if (cached && cached.version === this.version) return cached
    const visible = this.namesFor(agentId, true)
    const specs = visible.map((name) => {
      const { definition } = this.lookup(name, agentId)!
      return { name, description: definition.description, parameters: definition.parameters }
    })
    const view: ToolView = { version: this.version, names: Object.freeze([...visible].sort()), specs }
    this.viewCache.set(key, view)
    return view
  }

  /**
   * Execute one call for `agentId`. Never throws for a tool's own failure: unknown or
   * hidden tools, invalid arguments, thrown errors and aborts all become error results
   * the model can read.
   */
  execute(call: ToolCallBlock, exec: ToolExecution): Promise<ToolCallOutcome> {
    // As from an async function: a bug here rejects the call's promise, it is not thrown at the
    // caller (caught here rather than by rejectOnThrow, which would make a closure per call).
    try {
      return this.startExecution(call, exec)
    } catch (error) {
      return Promise.reject(error)
    }
  }

  /**
   * The synchronous checks of `execute`, then the tool. Not an async function: each child of
   * a fan-out is one call, and a suspended async function keeps a frame with every register
   * of the whole function until the tool answers. Only a call that must wait for something
   * before its tool runs (a validator compiling, permission gates) takes `executeAfterWaits`.
   */
  private startExecution(call: ToolCallBlock, exec: ToolExecution): Promise<ToolCallOutcome> {
    const entry = this.lookup(call.name, exec.agent.id)
    if (!entry || !this.allowed(call.name, exec.agent.id)) {
      return Promise.resolve(failure(call, `unknown tool "${call.name}" (available: ${this.namesFor(exec.agent.id, true).join(', ') || 'none'})`))
    }
    if (call.args === undefined) return Promise.resolve(failure(call, `the arguments of ${call.name} are not valid JSON: ${quoteRaw(call.rawArgs)}`))
    const checked = entry.args.validate(call.args)
    if (checked instanceof Promise || this.gated(entry.definition, exec.agent)) return this.executeAfterWaits(entry, call, exec, checked)
    if (checked) return Promise.resolve(failure(call, `invalid arguments for ${call.name}: ${checked}`))
    if (exec.signal.aborted) return Promise.resolve(failure(call, `${call.name} was not run: the call was aborted`))
    return runTool(entry.definition, call, exec, undefined)
  }

  /** The rest of `execute` for a call whose validator is still compiling or whose tool is gated. */
  private async executeAfterWaits(entry: Entry, call: ToolCallBlock, exec: ToolExecution, checked: string | undefined | Promise<string | undefined>): Promise<ToolCallOutcome> {
    let problem: string | undefined
    if (checked instanceof Promise) {
      // Awaited only on a tool's first call, while its validator compiles: every later call stays synchronous here.
      try {
        problem = await checked
      } catch (error) {
        return failure(call, `invalid arguments for ${call.name}: they cannot be checked: ${errorMessage(error)}`)
      }
      // The tool may have gone while its validator compiled (its plugin unloaded, its agent disposed).
      if (!this.stillServes(entry, call.name, exec.agent.id)) return failure(call, `${call.name} was not run: the tool was removed before the call could run`)
    } else problem = checked
    if (problem) return failure(call, `invalid arguments for ${call.name}: ${problem}`)
    if (exec.signal.aborted) return failure(call, `${call.name} was not run: the call was aborted`)
    let permission: ToolPermissionDecision | undefined
    if (this.gated(entry.definition, exec.agent)) {
      permission = await this.askGates({ ...call, args: call.args }, entry.definition, exec)
      if (permission.decision === 'reject') {
        return { ...failure(call, `${call.name} was not run: permission denied by ${permission.by}: ${permission.reason}`), permission }
      }
      if (exec.signal.aborted) return { ...failure(call, `${call.name} was not run: the call was aborted`), permission }
      if (!this.stillServes(entry, call.name, exec.agent.id)) return { ...failure(call, `${call.name} was not run: the tool was removed while permission was asked`), permission }
    }
    return runTool(entry.definition, call, exec, permission)
  }

  /** Whether a call of `definition` is put to the gates: a side-effecting tool's, or one a gate names with `alsoFor`. */
  private gated(definition: ToolDefinition, agent: ToolAgent): boolean {
    if (this.gates.length === 0) return false
    if (definition.sideEffecting === true) return true
    for (const wants of this.alsoFor.values()) if (wantsSafely(wants, definition.name, agent)) return true
    return false
  }

  /** Whether `entry` is still what `name` means for `agentId` (and the agent may still use it). */
  private stillServes(entry: Entry, name: string, agentId: string): boolean {
    return this.lookup(name, agentId) === entry && this.allowed(name, agentId)
  }

  /**
   * The gates' verdict on one call. A gate that throws, or a call aborted while a gate
   * waits, is a rejection: a side-effecting call never runs on a question left open.
   */
  private async askGates(call: ToolCallBlock & { args: unknown }, definition: ToolDefinition, exec: ToolExecution): Promise<ToolPermissionDecision> {
    let allowed: ToolPermissionDecision | undefined
    const sideEffecting = definition.sideEffecting === true
    for (const gate of [...this.gates]) {
      // A call without side effects goes only to the gates that asked for it.
      if (!sideEffecting && !wantsSafely(this.alsoFor.get(gate), definition.name, exec.agent)) continue
      let answer: ToolPermissionDecision | undefined
      try {
        answer = await gate({ call, tool: { name: definition.name, description: definition.description, sideEffecting }, agent: exec.agent, signal: exec.signal })
      } catch (error) {
        return { decision: 'reject', by: 'a permission gate', reason: exec.signal.aborted ? 'the call was aborted while permission was asked' : `the permission check failed: ${errorMessage(error)}` }
      }
      // A gate's own rejection says more than the abort (who withdrew it, and when); an allow is void once aborted.
      if (answer?.decision === 'reject') return answer
      if (exec.signal.aborted) return { decision: 'reject', by: 'a permission gate', reason: 'the call was aborted while permission was asked' }
      allowed ??= answer
    }
    return allowed ?? { decision: 'allow-once', by: 'no gate objected' }
  }

  /**
   * Execute the calls of one assistant message. Adjacent concurrency-safe calls run
   * together; every other call runs alone, in order. Outcomes come back in model order.
   */
  async executeAll(calls: readonly ToolCallBlock[], exec: Omit<ToolExecution, 'callId'>): Promise<ToolCallOutcome[]> {
    const outcomes: ToolCallOutcome[] = []
    let index = 0
    while (index < calls.length) {
      let end = index + 1
      if (this.isConcurrencySafe(calls[index], exec.agent.id)) {
        while (end < calls.length && this.isConcurrencySafe(calls[end], exec.agent.id)) end++
      }
      const batch = calls.slice(index, end)
      if (batch.length === 1) outcomes.push(await this.execute(batch[0], executionOf(batch[0], exec.signal, exec.agent)))
      else outcomes.push(...(await this.executeBatch(batch, exec)))
      index = end
    }
    return outcomes
  }

  /**
   * Run calls together. Nothing aborts one call of a batch alone: every call's signal
   * aborts exactly when the turn's does. Handing every call the turn's signal would have
   * each add its own listener to it, and Node's EventTarget checks every new listener
   * against all present ones: quadratic in a fan-out of a thousand delegations. So calls
   * share one relay signal per group of `CALLS_PER_RELAY`, each relay fed by one listener
   * on the turn's signal: the checks stay linear in the batch, and a fan-out pays for one
   * `AbortController` (about 1 KB and several microseconds in Node 20) per group instead
   * of one per call.
   */
  private async executeBatch(batch: readonly ToolCallBlock[], exec: Omit<ToolExecution, 'callId'>): Promise<ToolCallOutcome[]> {
    const relays: AbortController[] = []
    for (let start = 0; start < batch.length; start += CALLS_PER_RELAY) {
      const relay = new AbortController()
      // Up to CALLS_PER_RELAY tools listen on one relay, a few listeners each: above Node's
      // default of 10 it would warn of a leak (and build an Error with a stack each time).
      setMaxListeners(LISTENERS_PER_RELAY, relay.signal)
      relays.push(relay)
    }
    const abortAll = () => {
      for (const relay of relays) relay.abort(exec.signal.reason)
    }
    if (exec.signal.aborted) abortAll()
    else exec.signal.addEventListener('abort', abortAll, { once: true })
    try {
      const pending: Promise<ToolCallOutcome>[] = []
      for (let i = 0; i < batch.length; i++) {
        const call = batch[i]
        pending.push(this.execute(call, executionOf(call, relays[Math.floor(i / CALLS_PER_RELAY)].signal, exec.agent)))
      }
      return await Promise.all(pending)
    } finally {
      exec.signal.removeEventListener('abort', abortAll)
    }
  }

  private isConcurrencySafe(call: ToolCallBlock, agentId: string): boolean {
    return this.lookup(call.name, agentId)?.definition.concurrencySafe === true
  }

  private scopeTable(scope: string): Map<string, Entry> {
    let table = this.scoped.get(scope)
    if (!table) this.scoped.set(scope, (table = new Map()))
    return table
  }

  private lookup(name: string, agentId?: string): Entry | undefined {
    return (agentId !== undefined ? this.scoped.get(agentId)?.get(name) : undefined) ?? this.global.get(name)
  }

  private allowed(name: string, agentId: string): boolean {
    const filters = this.filters.get(agentId)
    if (!filters) return true
    for (const filter of filters) {
      if (filter.allow && !filter.allow.includes(name)) return false
      if (filter.deny && filter.deny.includes(name)) return false
    }
    return true
  }

  private namesFor(agentId: string, filtered: boolean): string[] {
    const names = [...this.global.keys()]
    const own = this.scoped.get(agentId)
    if (own) names.push(...own.keys())
    return filtered ? names.filter((name) => this.allowed(name, agentId)) : names
  }
}

/**
 * How many calls of a batch share one relay signal: large enough that a fan-out makes few
 * controllers, small enough that the listeners on one signal stay few (see `executeBatch`).
 */
const CALLS_PER_RELAY = 32

/** Listeners one relay signal takes before Node warns of a leak: a few per call sharing it. */
const LISTENERS_PER_RELAY = CALLS_PER_RELAY * 4

/**
 * One call's execution, built key by key: spreading the caller's object and adding
 * `callId` takes V8's generic copy, which every call of a fan-out would pay for.
 */
function executionOf(call: ToolCallBlock, signal: AbortSignal, agent: ToolExecution['agent']): ToolExecution {
  return { signal, callId: call.id, agent }
}

/**
 * A call that did not produce a result of its own, as an error result the model reads.
 * A module function, not a closure in `execute`: that would be made on the success path
 * too, which every child of a fan-out takes.
 */
function failure(call: ToolCallBlock, message: string): ToolCallOutcome {
  return { result: resultBlock(call, message, true), endsTurn: false }
}

function resultBlock(call: ToolCallBlock, text: string, isError: boolean): ToolResultBlock {
  const block: ToolResultBlock = { type: 'tool-result', callId: call.id, name: call.name, content: [{ type: 'text', text }] }
  if (isError) block.isError = true
  return block
}

function outcomeOf(call: ToolCallBlock, output: ToolOutput): ToolCallOutcome {
  if (typeof output === 'string') return { result: resultBlock(call, output, false), endsTurn: false }
  const content: TextBlock[] = typeof output.content === 'string' ? [{ type: 'text', text: output.content }] : output.content
  const result: ToolResultBlock = { type: 'tool-result', callId: call.id, name: call.name, content }
  if (output.isError) result.isError = true
  const outcome: ToolCallOutcome = { result, endsTurn: output.endsTurn === true }
  if (output.record !== undefined) outcome.record = output.record
  return outcome
}

function withPermission(outcome: ToolCallOutcome, permission: ToolPermissionDecision | undefined): ToolCallOutcome {
  return permission === undefined ? outcome : { ...outcome, permission }
}

/**
 * Run a checked call's tool: its output, or what it threw (synchronously or as a
 * rejection), as the call's outcome. Two promise callbacks rather than an async function,
 * which would keep a suspended frame per call of a fan-out until the tool answers.
 */
function runTool(definition: ToolDefinition, call: ToolCallBlock, exec: ToolExecution, permission: ToolPermissionDecision | undefined): Promise<ToolCallOutcome> {
  let output: ToolOutput | Promise<ToolOutput>
  try {
    output = definition.execute(call.args, exec)
  } catch (error) {
    return Promise.resolve(thrownOutcome(call, exec, permission, error))
  }
  return Promise.resolve(output).then(
    (answered) => {
      try {
        return withPermission(outcomeOf(call, answered), permission)
      } catch (error) {
        // An output of the wrong shape is the tool's failure, as if it had thrown.
        return thrownOutcome(call, exec, permission, error)
      }
    },
    (error: unknown) => thrownOutcome(call, exec, permission, error),
  )
}

function thrownOutcome(call: ToolCallBlock, exec: ToolExecution, permission: ToolPermissionDecision | undefined, error: unknown): ToolCallOutcome {
  if (exec.signal.aborted) return withPermission(failure(call, `${call.name} was aborted${error instanceof Error ? `: ${error.message}` : ''}`), permission)
  return withPermission(failure(call, `${call.name} failed: ${errorMessage(error)}`), permission)
}

/** The model's unparsable argument text, for its error result: `(empty)` for none, long text cut. */
function quoteRaw(rawArgs: string | undefined): string {
  if (!rawArgs) return '(empty)'
  return rawArgs.length > 500 ? `${rawArgs.slice(0, 500)}… (${rawArgs.length} characters)` : rawArgs
}

/** A gate's `alsoFor` on `tool`; one that throws wants it (the gate then decides, or its failure refuses). */
function wantsSafely(wants: ((tool: string, agent: ToolAgent) => boolean) | undefined, tool: string, agent: ToolAgent): boolean {
  if (wants === undefined) return false
  try {
    return wants(tool, agent)
  } catch {
    return true
  }
}
