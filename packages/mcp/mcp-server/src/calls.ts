/**
 * One `tools/call` is one delegation, run by the one served line of `@dsh/subagent`
 * (`served.ts`): its lineage (only the trace context of the request's `_meta`: an MCP client
 * is not a dsh parent, so no rules, budget or depth of its saying are read) →
 * `admitDelegation` (this server's depth bound) → a slot of the server's bound →
 * `serveDelegation` (the agent, as the tool's helper when it has one; run until quiet, its
 * progress and its whole subtree's usage followed; disposed) → the answer as text content,
 * the stop and usage in `_meta.dsh`. The request's signal (the client's
 * `notifications/cancelled`, or its connection closing) aborts the run: its turn ends
 * `aborted`, its tasks and children are stopped and its approval requests withdrawn.
 */
import type { Context } from 'cordis'
import { errorMessage, printable, type FifoSlots } from '@dsh/base'
import type { CreateAgentOptions } from '@dsh/agent'
import type { AgentDefinition } from '@dsh/agent-definitions'
import { admitDelegation, readTraceContext, serveDelegation, type AdmittedDelegation, type ReceivedLineage, type SubagentProgress, type SubagentUsage } from '@dsh/subagent'
import type { CallToolResult, ElicitRequestFormParams, ElicitResult } from '@modelcontextprotocol/sdk/types.js'
import type { ServedTool } from './tools.js'

/** The session origin of calls served over MCP. */
export const MCP_ORIGIN = 'mcp'

/** The longest progress message sent to a client, in characters. */
const MAX_PROGRESS_MESSAGE_CHARS = 300

/** What the server knows of one `tools/call` beside its arguments. */
export interface CallWire {
  /** The request's `_meta` (its trace context is read). */
  meta: Record<string, unknown> | undefined
  /** Aborts when the client cancels the call or its connection closes. */
  signal: AbortSignal
  /** Sends one `notifications/progress` (only when the client sent a progress token). */
  progress?: (progress: number, message: string) => Promise<void>
  /** Asks the client's user (only where the client declared elicitation). */
  elicit?: (params: ElicitRequestFormParams, signal: AbortSignal, timeoutMs: number) => Promise<ElicitResult>
}

/** A call as its start and end are told (`dsh mcp serve` logs a line for each). */
export type McpCallEvent = ({ phase: 'start' } & McpCallAbout) | ({ phase: 'end'; outcome: string; detail?: string; durationMs: number; usage?: SubagentUsage } & McpCallAbout)

export interface McpCallAbout {
  /** `call 3` within this server. */
  id: string
  tool: string
  helper?: string
}

/** A call running here, by its agent's id: the approval requests of that agent and those below it are the call's. */
export interface RunningCall {
  readonly about: McpCallAbout
  readonly wire: CallWire
}

export interface CallRunnerOptions {
  maxDepth: number
  cwd: string
  slots: FifoSlots
  onCall?: (event: McpCallEvent) => void
  warn: (line: string) => void
}

export class CallRunner {
  private counter = 0
  /** Running calls by their agent's id (`approvals.ts` asks through them). */
  readonly byAgent = new Map<string, RunningCall>()
  /** Aborted at close: every call still running or waiting is stopped. */
  private readonly closing = new AbortController()
  private readonly running = new Set<Promise<unknown>>()

  constructor(
    private readonly ctx: Context,
    private readonly options: CallRunnerOptions,
  ) {}

  /** Calls running or waiting for a slot. */
  get size(): number {
    return this.running.size
  }

  /** Run `prompt` as a call of `served`; never rejects (a failure is an error result saying why). */
  run(served: ServedTool, prompt: string, wire: CallWire): Promise<CallToolResult> {
    const about: McpCallAbout = { id: `call ${++this.counter}`, tool: served.tool.name, ...(served.helper && { helper: served.helper.name }) }
    const done = this.runToEnd(about, served.helper, prompt, wire)
    this.running.add(done)
    void done.finally(() => this.running.delete(done))
    return done
  }

  /** Stop every call and wait until each has ended (its agent disposed, its session flushed). */
  async close(): Promise<void> {
    this.closing.abort(new Error('dsh mcp serve is shutting down'))
    await Promise.allSettled([...this.running])
  }

  private async runToEnd(about: McpCallAbout, helper: AgentDefinition | undefined, prompt: string, wire: CallWire): Promise<CallToolResult> {
    const started = Date.now()
    const signal = AbortSignal.any([wire.signal, this.closing.signal])
    let usage: SubagentUsage | undefined
    const end = (outcome: string, result: CallToolResult, detail?: string): CallToolResult => {
      this.tell({ phase: 'end', ...about, outcome, ...(detail !== undefined && { detail }), durationMs: Date.now() - started, ...(usage !== undefined && { usage }) })
      return result
    }
    this.tell({ phase: 'start', ...about })
    let admitted: AdmittedDelegation
    try {
      admitted = admitDelegation({ maxDepth: this.options.maxDepth, subject: 'this call would run', own: "this server's" }, lineageOf(wire.meta, this.options.warn))
    } catch (error) {
      return end('refused', errorResult(`${about.tool}: ${errorMessage(error)}`), errorMessage(error))
    }
    try {
      await this.options.slots.acquire(signal)
    } catch {
      return end('cancelled', errorResult(`${about.tool}: the call was cancelled while it waited for a free slot`))
    }
    try {
      const progress = wire.progress && progressReporter(wire.progress, this.options.warn)
      const served = await serveDelegation(this.ctx, admitted, {
        ...helperAgent(helper),
        meta: { origin: MCP_ORIGIN, cwd: this.options.cwd, ...(helper && { helper: { name: helper.name, hash: helper.source.hash } }) },
        provider: MCP_ORIGIN,
        maxDepth: helper?.maxDepth,
        prompt,
        signal,
        opened: (agent) => {
          this.byAgent.set(agent.id, { about, wire })
          return () => this.byAgent.delete(agent.id)
        },
        ...(progress && { progress }),
        onUsage: (total) => {
          usage = total
          progress?.report({ kind: 'usage', usage: total })
        },
        disposeFailed: (error) => this.options.warn(`disposing the agent of ${about.id} failed: ${errorMessage(error)}`),
      })
      const stop = served.cancelled ? 'aborted' : served.last.reason
      const meta = { dsh: { session: served.agentId, stop, ...(served.usageReported && { usage: served.usage }) } }
      if (stop === 'completed') return end('completed', { content: [{ type: 'text', text: served.answer }], _meta: meta })
      const why = `the turn ended ${served.last.reason}${served.last.error ? `: ${served.last.error}` : ''}`
      return end(stop, { isError: true, content: [{ type: 'text', text: served.answer ? `${served.answer}\n\n(${why})` : `${about.tool}: ${why}` }], _meta: meta }, why)
    } catch (error) {
      return end('failed', errorResult(`${about.tool}: the call could not run: ${errorMessage(error)}`), errorMessage(error))
    } finally {
      this.options.slots.release()
    }
  }

  private tell(event: McpCallEvent): void {
    try {
      this.options.onCall?.(event)
    } catch (error) {
      this.options.warn(`onCall failed: ${errorMessage(error)}`)
    }
  }
}

export function errorResult(text: string): CallToolResult {
  return { isError: true, content: [{ type: 'text', text }] }
}

/**
 * The lineage of a call: the trace context of its `_meta` (`traceparent`, `tracestate`),
 * so its spans join the client's trace. Nothing else: what a client writes there is not a
 * dsh parent's word, so it grants and bounds nothing.
 */
function lineageOf(meta: Record<string, unknown> | undefined, warn: (line: string) => void): ReceivedLineage {
  if (meta?.traceparent === undefined) return {}
  const trace = readTraceContext(meta)
  if (trace === undefined) warn('ignoring a malformed traceparent in a call\'s _meta (a new trace starts)')
  return trace === undefined ? {} : { trace }
}

/** What a call's agent is made with when it runs as a helper: its instructions as persona, its model and its tool list. */
function helperAgent(helper: AgentDefinition | undefined): Pick<CreateAgentOptions, 'agentOptions' | 'setup'> {
  if (helper === undefined) return {}
  const agentOptions: NonNullable<CreateAgentOptions['agentOptions']> = {}
  if (helper.instructions !== '') agentOptions.persona = helper.instructions
  if (helper.model !== undefined) agentOptions.model = helper.model
  const made: Pick<CreateAgentOptions, 'agentOptions' | 'setup'> = { agentOptions }
  if (helper.tools !== undefined || helper.disallowedTools !== undefined) {
    const filter = { ...(helper.tools && { allow: [...helper.tools] }), ...(helper.disallowedTools && { deny: [...helper.disallowedTools] }) }
    made.setup = (ctx, agent) => void ctx.tools.restrict(agent.id, filter)
  }
  return made
}

/**
 * The run's progress as MCP progress notifications: each update one notification, its
 * `progress` counting up (the protocol wants it to increase; no total is known), its
 * message one printable line. A notification that cannot be sent is logged once; the call
 * goes on.
 */
function progressReporter(send: NonNullable<CallWire['progress']>, warn: (line: string) => void): { report(update: SubagentProgress): void } {
  let count = 0
  let failed = false
  return {
    report(update) {
      const message = progressMessage(update)
      if (message === undefined) return
      send(++count, printable(message).slice(0, MAX_PROGRESS_MESSAGE_CHARS)).catch((error: unknown) => {
        if (!failed) warn(`a progress notification could not be sent: ${errorMessage(error)}`)
        failed = true
      })
    },
  }
}

function progressMessage(update: SubagentProgress): string | undefined {
  switch (update.kind) {
    case 'text':
      return update.text.trim() === '' ? undefined : update.text
    case 'tool-start':
      return `calling ${update.name}${update.args ? ` ${update.args}` : ''}`
    case 'tool-end':
      return `${update.name} ${update.ok ? 'done' : `failed${update.detail ? `: ${update.detail}` : ''}`}`
    case 'status':
      return update.text
    case 'usage':
      return `${update.usage.inputTokens} input and ${update.usage.outputTokens} output tokens so far`
    default:
      return undefined
  }
}
