/**
 * Each A2A task is a turn of its context's dsh session (`contexts.ts`: the context id is
 * the session id): the first task of a context creates the session, an agent made through
 * `ctx.agents` with the lineage the message's `metadata.dsh` carries (origin `a2a`); a
 * later task reopens it from storage. The agent runs until quiet, then is disposed (which
 * flushes its session) before the task's final status is sent, so a client that heard the
 * end can continue the context at once. Progress streams while it runs: assistant text
 * as appends to the one `answer` artifact, each tool call as a `working` status; the
 * artifact's last chunk makes its content the whole answer (the output-selection rule's
 * choice, which may differ from all the text streamed: a step's "let me check" is not part
 * of it), then the final status. A generic client reading the task's artifact gets the answer. A cancel aborts the run (the turn
 * ends `aborted`, the agent's tasks and children are stopped) and the task ends
 * `canceled`. Tasks beyond the concurrency bound wait in `submitted`. While a task waits
 * or works, a keep-alive status update repeats its state every `keepAliveMs`, so a client
 * can tell a silent worker from a busy one.
 *
 * A message that names a task still running here is refused before it reaches the
 * executor (`refuseRunningTask`, called by the request handler): the SDK would otherwise
 * run a second session on the same task's event bus.
 */
import { TaskState, type Task } from '@a2a-js/sdk'
import { AgentEvent, STATE_HEADERS_KEY, type AgentExecutor, type ExecutionEventBus, type RequestContext } from '@a2a-js/sdk/server'
import type { Context } from 'cordis'
import { UnsupportedOperationError } from '@a2a-js/sdk/errors'
import { errorMessage, isRecord } from '@dsh/base'
import { text, textOf } from '@dsh/llm'
import { runUntilQuiet } from '@dsh/tasks'
import { A2A_LINEAGE, addUsage, admitDepth, lineageHeader, noUsage, tighterBound } from '@dsh/subagent'
import { A2aServerError } from './errors.js'
import { ANSWER_ARTIFACT, argsPreview, artifactEvent, keepAliveEvent, statusEvent, taskStateOfStop, textOfMessage, type DshProgress, type DshStatusMetadata, type DshUsage } from './events.js'
import type { TaskSlots } from './slots.js'
import type { AgentDefinition } from '@dsh/agent-definitions'
import type { CreateAgentOptions } from '@dsh/agent'
import { PROMPT_SKILL, requestedSkill } from './skills.js'
import { A2A_ORIGIN, type ContextClaim, type ContextHold, type Contexts } from './contexts.js'

export interface ExecutorOptions {
  maxDepth: number
  /** The cwd of every task's session. */
  cwd: string
  /** Longest prompt text accepted, in characters. */
  maxPromptChars: number
  /** How often a waiting or working task sends a keep-alive status update. */
  keepAliveMs: number
  /** The helpers a message's `metadata.skill` may name (`skills.ts`). */
  helpers?: ReadonlyMap<string, AgentDefinition>
}

interface RunningTask {
  readonly cancel: AbortController
  readonly finished: Promise<void>
}

export class DshAgentExecutor implements AgentExecutor {
  private readonly running = new Map<string, RunningTask>()

  constructor(
    private readonly ctx: Context,
    private readonly slots: TaskSlots,
    private readonly contexts: Contexts,
    private readonly options: ExecutorOptions,
  ) {}

  /** Tasks started and not yet finished. */
  get size(): number {
    return this.running.size
  }

  /** Whether a task is waiting or working here. */
  isRunning(taskId: string): boolean {
    return this.running.has(taskId)
  }

  /**
   * A message may continue no task that is still running: it would start a second session
   * on the same task, and the two would share (and break) its event stream. Throws the
   * A2A error the client receives; the running task is left alone.
   */
  refuseRunningTask(taskId: string | undefined): void {
    if (!taskId || !this.running.has(taskId)) return
    throw new UnsupportedOperationError(`task ${taskId} is still running; wait until it ends (or cancel it), then send a new message without a taskId`)
  }

  execute = async (request: RequestContext, bus: ExecutionEventBus): Promise<void> => {
    const cancel = new AbortController()
    let finish!: () => void
    const finished = new Promise<void>((resolve) => (finish = resolve))
    this.running.set(request.taskId, { cancel, finished })
    // Taken over at once, before anything is awaited: the request handler admitted the context.
    let hold = this.contexts.take(request.contextId, request.taskId)
    try {
      // A message that names its task (the SDK inferred the context from it) was not admitted by the handler.
      hold ??= await this.contexts.admit(request.userMessage).catch((error: unknown) => {
        this.publishRefusal(request, bus, errorMessage(error))
        return undefined
      })
      if (hold) await this.runTask(request, bus, cancel.signal, hold)
    } finally {
      hold?.release()
      this.running.delete(request.taskId)
      finish()
      bus.finished()
    }
  }

  cancelTask = async (taskId: string, bus: ExecutionEventBus): Promise<void> => {
    const task = this.running.get(taskId)
    if (!task) {
      // Not running here (it finished, or a restart lost it): there is nothing to stop.
      return void bus.publish(statusEvent(taskId, '', TaskState.TASK_STATE_CANCELED, 'the task was not running'))
    }
    task.cancel.abort(new A2aServerError('TASK_CANCELLED', `task ${taskId} was cancelled by the A2A client`))
    await task.finished
  }

  /** Cancel every task and wait until each has ended (server shutdown). */
  async cancelAll(reason: string): Promise<void> {
    const tasks = [...this.running.values()]
    for (const task of tasks) task.cancel.abort(new A2aServerError('TASK_CANCELLED', reason))
    await Promise.all(tasks.map((task) => task.finished))
  }

  /** A task refused before it began: its first event, then `rejected`. */
  private publishRefusal(request: RequestContext, bus: ExecutionEventBus, why: string): void {
    const { taskId, contextId, userMessage } = request
    bus.publish(AgentEvent.task({ id: taskId, contextId, status: { state: TaskState.TASK_STATE_SUBMITTED, message: undefined, timestamp: new Date().toISOString() }, artifacts: [], history: [userMessage], metadata: undefined }))
    bus.publish(statusEvent(taskId, contextId, TaskState.TASK_STATE_REJECTED, why))
  }

  private async runTask(request: RequestContext, bus: ExecutionEventBus, signal: AbortSignal, hold: ContextHold): Promise<void> {
    const { taskId, contextId, userMessage } = request
    const task: Task = { id: taskId, contextId, status: { state: TaskState.TASK_STATE_SUBMITTED, message: undefined, timestamp: new Date().toISOString() }, artifacts: [], history: [userMessage], metadata: undefined }
    bus.publish(AgentEvent.task(task))
    // Until the final status: a keep-alive repeating the current state.
    let state = TaskState.TASK_STATE_SUBMITTED
    const keepAlive = setInterval(() => bus.publish(keepAliveEvent(taskId, contextId, state)), this.options.keepAliveMs)
    try {
      await this.runToEnd(request, bus, signal, hold, (next) => (state = next), () => clearInterval(keepAlive))
    } finally {
      clearInterval(keepAlive)
    }
  }

  private async runToEnd(request: RequestContext, bus: ExecutionEventBus, signal: AbortSignal, hold: ContextHold, enter: (state: TaskState) => void, stopKeepAlive: () => void): Promise<void> {
    const { taskId, contextId, userMessage } = request
    const { claim } = hold
    const log = this.ctx.logger('a2a-server')
    const end = (state: TaskState, note?: string, dsh?: DshStatusMetadata) => {
      if (state !== TaskState.TASK_STATE_WORKING) stopKeepAlive()
      else enter(state)
      bus.publish(statusEvent(taskId, contextId, state, note, dsh))
    }

    const prompt = textOfMessage(userMessage)
    if (!prompt.trim()) return end(TaskState.TASK_STATE_REJECTED, 'the message has no text; send at least one text part')
    if (prompt.length > this.options.maxPromptChars) return end(TaskState.TASK_STATE_REJECTED, `the message has ${prompt.length} characters of text, more than this worker accepts (${this.options.maxPromptChars}); send less`)
    const chosen = this.helperOf(claim, requestedSkill(userMessage.metadata))
    if (typeof chosen === 'string') return end(TaskState.TASK_STATE_REJECTED, chosen)
    const helper = chosen.helper
    const lineage = A2A_LINEAGE.read(withTraceHeaders(userMessage.metadata, request.context?.state.get(STATE_HEADERS_KEY)), log)
    // Refused before anything exists, like dsh acp: delegation through workers stays bounded,
    // by the tighter of this worker's bound and the one the delegating parent inherited
    // (for a context continued, the one its session recorded).
    const [depth, inherited] = claim.kind === 'new' ? [lineage.delegationDepth ?? 0, lineage.maxDepth] : [claim.header.delegationDepth ?? 0, claim.header.maxDepth]
    const bound = tighterBound(this.options.maxDepth, lineage.maxDepth)!
    try {
      admitDepth(depth, this.options.maxDepth, inherited, {
        subject: 'this task would run',
        bound: (limit, whose) => `${whose === 'own' ? "this worker's" : "the delegating parent's"} maxDepth ${limit}`,
      })
    } catch (error) {
      return end(TaskState.TASK_STATE_REJECTED, errorMessage(error))
    }

    try {
      await this.slots.acquire(signal)
    } catch {
      return end(TaskState.TASK_STATE_CANCELED, 'the task was cancelled while it waited for a free slot')
    }
    let final: [TaskState, string?, DshStatusMetadata?]
    try {
      end(TaskState.TASK_STATE_WORKING)
      const made = helperAgent(helper)
      // The session records the bound, so the task's own delegations stay within it. Its id is the context's.
      const agent = await this.ctx.agents.create(
        claim.kind === 'new'
          ? { ...made, meta: { id: contextId, origin: A2A_ORIGIN, cwd: this.options.cwd, ...lineageHeader(lineage), provider: lineage.provider ?? 'a2a', maxDepth: tighterBound(bound, helper?.maxDepth), ...(helper && { helper: { name: helper.name, hash: helper.source.hash } }) } }
          : { ...made, sessionId: contextId },
      )
      let streamedAny = false
      let streamed = ''
      const usage: DshUsage = noUsage()
      let usageReported = false
      const working = (progress: DshProgress, note?: string) => bus.publish(statusEvent(taskId, contextId, TaskState.TASK_STATE_WORKING, note, { progress: [progress] }))
      const unsubscribe = agent.session.subscribe((update) => {
        switch (update.type) {
          case 'assistant/chunk':
            if (update.kind !== 'text') return
            bus.publish(artifactEvent(taskId, contextId, ANSWER_ARTIFACT, update.text, streamedAny, false))
            streamedAny = true
            streamed += update.text
            return
          case 'tool/call': {
            const { call } = update
            return working({ kind: 'tool-start', callId: call.id, name: call.name, args: argsPreview(call.args ?? call.rawArgs ?? {}) }, `calling ${call.name}`)
          }
          case 'tool/result': {
            const { result } = update
            const ended: DshProgress = { kind: 'tool-end', callId: result.callId, name: result.name, ok: result.isError !== true }
            return working(result.isError ? { ...ended, detail: argsPreview(textOf(result.content)) } : ended)
          }
          case 'assistant/message':
            if (!update.usage) return
            addUsage(usage, update.usage)
            usageReported = true
            return working({ kind: 'usage', usage: { ...usage } })
          default:
            return
        }
      })
      try {
        // The answer waits until the agent is quiet (its tasks and continuable children), as in dsh run and dsh acp.
        const run = await runUntilQuiet(agent, { role: 'user', content: [text(prompt)] }, { tasks: this.ctx.get('tasks'), signal })
        const answer = run.output.map((block) => block.text).join('')
        // The last chunk: an empty append when the stream was the answer, else the answer replacing it.
        if (answer && answer === streamed) bus.publish(artifactEvent(taskId, contextId, ANSWER_ARTIFACT, '', true, true))
        else if (answer || streamedAny) bus.publish(artifactEvent(taskId, contextId, ANSWER_ARTIFACT, answer, false, true))
        const stop = run.cancelled ? 'aborted' : run.last.reason
        final = [taskStateOfStop(stop), stop === 'completed' ? undefined : `the turn ended ${run.last.reason}${run.last.error ? `: ${run.last.error}` : ''}`, usageReported ? { usage } : undefined]
      } finally {
        unsubscribe()
        // Flushed and released before the final status: the context's next task may reopen it at once.
        await agent.dispose().catch((error: unknown) => log.warn('disposing the agent of task %s failed: %s', taskId, errorMessage(error)))
      }
    } catch (error) {
      final = [TaskState.TASK_STATE_FAILED, `the task could not run: ${errorMessage(error)}`]
    } finally {
      this.slots.release()
    }
    hold.release()
    end(...final)
  }

  /**
   * The helper a task runs as, or why it cannot run: a new context runs as the skill its
   * message names (none: a plain session); a context continued keeps the helper it began
   * with (its header names it), and a message naming another skill is refused.
   */
  private helperOf(claim: ContextClaim, skill: string | undefined): { helper: AgentDefinition | undefined } | string {
    const helpers = this.options.helpers
    const known = () => `skills: ${[PROMPT_SKILL, ...(helpers?.keys() ?? [])].join(', ')}; its agent card lists them`
    if (claim.kind === 'new') {
      if (skill === undefined) return { helper: undefined }
      const helper = helpers?.get(skill)
      return helper ? { helper } : `this worker has no skill "${skill}" (${known()})`
    }
    const began = claim.header.helper?.name
    if (skill !== undefined && skill !== began) {
      return `context ${claim.contextId} runs ${began === undefined ? 'as a plain session' : `as the helper "${began}"`}; a context keeps the skill it began with: send this message without metadata.skill${began === undefined ? '' : ` (or with "${began}")`}, or start a new context`
    }
    if (began === undefined) return { helper: undefined }
    const helper = helpers?.get(began)
    return helper ? { helper } : `context ${claim.contextId} runs as the helper "${began}", which this worker no longer defines (${known()})`
  }
}

/**
 * What a task's agent is made with when it runs as a helper: the helper's instructions as
 * persona, its model and its tool list (its name and hash go in a new session's header).
 * The same for a context continued, whose agent is made again for each task.
 */
function helperAgent(helper: AgentDefinition | undefined): Pick<CreateAgentOptions, 'agentOptions' | 'setup'> {
  if (helper === undefined) return {}
  const made: Pick<CreateAgentOptions, 'agentOptions' | 'setup'> = { agentOptions: {} }
  if (helper.instructions !== '') made.agentOptions!.persona = helper.instructions
  if (helper.model !== undefined) made.agentOptions!.model = helper.model
  if (helper.tools !== undefined || helper.disallowedTools !== undefined) {
    const filter = { ...(helper.tools && { allow: helper.tools }), ...(helper.disallowedTools && { deny: helper.disallowedTools }) }
    made.setup = (ctx, agent) => void ctx.tools.restrict(agent.id, filter)
  }
  return made
}

/**
 * The message's metadata, with the W3C trace headers of the HTTP request when the metadata
 * has no trace context of its own (a client that is not dsh propagates only headers).
 */
function withTraceHeaders(metadata: unknown, headers: unknown): unknown {
  if (!isRecord(headers) || headers.traceparent === undefined) return metadata
  if (isRecord(metadata) && metadata.traceparent !== undefined) return metadata
  const header = (name: string) => (Array.isArray(headers[name]) ? (headers[name] as unknown[])[0] : headers[name])
  return { ...(isRecord(metadata) ? metadata : {}), traceparent: header('traceparent'), ...(headers.tracestate !== undefined && { tracestate: header('tracestate') }) }
}
