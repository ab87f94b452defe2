/**
 * Each A2A task is one dsh session: an agent created through `ctx.agents` with the
 * lineage the message's `metadata.dsh` carries (origin `a2a`), run until quiet, then
 * disposed (which flushes its session). Progress streams while it runs: assistant text
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
    try {
      await this.runTask(request, bus, cancel.signal)
    } finally {
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

  private async runTask(request: RequestContext, bus: ExecutionEventBus, signal: AbortSignal): Promise<void> {
    const { taskId, contextId, userMessage } = request
    const task: Task = { id: taskId, contextId, status: { state: TaskState.TASK_STATE_SUBMITTED, message: undefined, timestamp: new Date().toISOString() }, artifacts: [], history: [userMessage], metadata: undefined }
    bus.publish(AgentEvent.task(task))
    // Until the final status: a keep-alive repeating the current state.
    let state = TaskState.TASK_STATE_SUBMITTED
    const keepAlive = setInterval(() => bus.publish(keepAliveEvent(taskId, contextId, state)), this.options.keepAliveMs)
    try {
      await this.runToEnd(request, bus, signal, (next) => (state = next), () => clearInterval(keepAlive))
    } finally {
      clearInterval(keepAlive)
    }
  }

  private async runToEnd(request: RequestContext, bus: ExecutionEventBus, signal: AbortSignal, enter: (state: TaskState) => void, stopKeepAlive: () => void): Promise<void> {
    const { taskId, contextId, userMessage } = request
    const log = this.ctx.logger('a2a-server')
    const end = (state: TaskState, note?: string, dsh?: DshStatusMetadata) => {
      if (state !== TaskState.TASK_STATE_WORKING) stopKeepAlive()
      else enter(state)
      bus.publish(statusEvent(taskId, contextId, state, note, dsh))
    }

    const prompt = textOfMessage(userMessage)
    if (!prompt.trim()) return end(TaskState.TASK_STATE_REJECTED, 'the message has no text; send at least one text part')
    if (prompt.length > this.options.maxPromptChars) return end(TaskState.TASK_STATE_REJECTED, `the message has ${prompt.length} characters of text, more than this worker accepts (${this.options.maxPromptChars}); send less`)
    const skill = requestedSkill(userMessage.metadata)
    const helper = skill === undefined ? undefined : this.options.helpers?.get(skill)
    if (skill !== undefined && helper === undefined) {
      return end(TaskState.TASK_STATE_REJECTED, `this worker has no skill "${skill}" (skills: ${[PROMPT_SKILL, ...(this.options.helpers?.keys() ?? [])].join(', ')}); its agent card lists them`)
    }
    const lineage = A2A_LINEAGE.read(withTraceHeaders(userMessage.metadata, request.context?.state.get(STATE_HEADERS_KEY)), log)
    // Refused before anything exists, like dsh acp: delegation through workers stays bounded,
    // by the tighter of this worker's bound and the one the delegating parent inherited.
    const bound = tighterBound(this.options.maxDepth, lineage.maxDepth)!
    try {
      admitDepth(lineage.delegationDepth ?? 0, this.options.maxDepth, lineage.maxDepth, {
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
    try {
      end(TaskState.TASK_STATE_WORKING)
      // The session records the bound, so the task's own delegations stay within it.
      const agent = await this.ctx.agents.create(taskAgent({ origin: 'a2a', cwd: this.options.cwd, ...lineageHeader(lineage), provider: lineage.provider ?? 'a2a', maxDepth: bound }, helper))
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
        end(taskStateOfStop(stop), stop === 'completed' ? undefined : `the turn ended ${run.last.reason}${run.last.error ? `: ${run.last.error}` : ''}`, usageReported ? { usage } : undefined)
      } finally {
        unsubscribe()
        await agent.dispose().catch((error: unknown) => log.warn('disposing the agent of task %s failed: %s', taskId, errorMessage(error)))
      }
    } catch (error) {
      end(TaskState.TASK_STATE_FAILED, `the task could not run: ${errorMessage(error)}`)
    } finally {
      this.slots.release()
    }
  }
}

/**
 * How a task's agent is made: a plain session, or (a skill) the helper itself, with its
 * instructions as persona, its model, its tool list, the tighter depth bound and its
 * name and hash in the header.
 */
function taskAgent(meta: NonNullable<CreateAgentOptions['meta']>, helper: AgentDefinition | undefined): CreateAgentOptions {
  if (helper === undefined) return { meta }
  const options: CreateAgentOptions = { meta: { ...meta, maxDepth: tighterBound(meta.maxDepth, helper.maxDepth), helper: { name: helper.name, hash: helper.source.hash } }, agentOptions: {} }
  if (helper.instructions !== '') options.agentOptions!.persona = helper.instructions
  if (helper.model !== undefined) options.agentOptions!.model = helper.model
  if (helper.tools !== undefined || helper.disallowedTools !== undefined) {
    const filter = { ...(helper.tools && { allow: helper.tools }), ...(helper.disallowedTools && { deny: helper.disallowedTools }) }
    options.setup = (ctx, agent) => void ctx.tools.restrict(agent.id, filter)
  }
  return options
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
