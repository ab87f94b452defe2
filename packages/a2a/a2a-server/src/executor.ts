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
 * of it), then the final status. A generic client reading the task's artifact gets the
 * answer. A cancel aborts the run (the turn ends `aborted`, the agent's tasks and children
 * are stopped, its approval requests are rejected at once) and the task ends `canceled`.
 * Tasks beyond the concurrency bound wait in `submitted`. While a task waits or works, a
 * keep-alive status update repeats its state every `keepAliveMs`, so a client can tell a
 * silent worker from a busy one.
 *
 * A side effect of the task's agent (or of an agent below it in this process) that the
 * approval broker leaves to ask is asked of the task's caller: the task enters
 * `input-required`, and the caller's next message on it answers (`task-run.ts`: each
 * message is a leg of the one run; `approvals.ts`: the wire). A message that names a
 * running task and is not such an answer is refused before it reaches the executor
 * (`admitFollowUp`, called by the request handler): the SDK would otherwise run a second
 * session on the same task's event bus.
 */
import { TaskState, type Message } from '@a2a-js/sdk'
import { AgentEvent, STATE_HEADERS_KEY, type AgentExecutor, type ExecutionEventBus, type RequestContext } from '@a2a-js/sdk/server'
import type { Context } from 'cordis'
import { errorMessage, isRecord, type FifoSlots } from '@dsh/base'
import { A2A_LINEAGE, admitDelegation, serveDelegation, trackDescendants, type AdmittedDelegation, type ReceivedLineage } from '@dsh/subagent'
import { delegationName, type ApprovalRequestInfo, type FrontEndAnswer } from '@dsh/approvals'
import { A2aServerError } from './errors.js'
import { ANSWER_ARTIFACT, argsPreview, artifactEvent, stateName, statusEvent, taskStateOfStop, textOfMessage, type DshProgress, type DshStatusMetadata, type DshUsage } from './events.js'
import type { AgentDefinition } from '@dsh/agent-definitions'
import type { CreateAgentOptions } from '@dsh/agent'
import { PROMPT_SKILL, requestedSkill } from './skills.js'
import { A2A_ORIGIN, type ContextClaim, type ContextHold, type Contexts } from './contexts.js'
import type { Answerer, ApprovalAsker } from './approvals.js'
import { TaskRun, type Reservation, type TaskRunParts } from './task-run.js'

interface ExecutorOptions {
  maxDepth: number
  /** The cwd of every task's session. */
  cwd: string
  /** Longest prompt text accepted, in characters. */
  maxPromptChars: number
  /** How often a waiting or working task sends a keep-alive status update. */
  keepAliveMs: number
  /** The helpers a message's `metadata.skill` may name (`skills.ts`). */
  helpers?: ReadonlyMap<string, AgentDefinition>
  /** Who may answer a task's `input-required` request (`approvals.ts`); `caller` when not said. */
  answerer?: Answerer
  /** Told as each task starts and ends (`dsh a2a serve` logs a line for each); observe-only: what it throws is ignored. */
  onTask?: (event: A2aTaskEvent) => void
}

/**
 * A task as `onTask` hears of it. `skill` and `label` are as its first message says them
 * (the skill asked for, the delegating parent's description), unchecked: for a log line,
 * not for trust. `state`: the task's final state (`completed`, `failed`, `canceled`, `rejected`).
 */
export type A2aTaskEvent =
  | ({ phase: 'start' } & A2aTaskAbout)
  | ({ phase: 'end'; state: string; durationMs: number; usage?: DshUsage } & A2aTaskAbout)

interface A2aTaskAbout {
  id: string
  contextId: string
  skill?: string
  label?: string
}

export class DshAgentExecutor implements AgentExecutor, ApprovalAsker {
  private readonly running = new Map<string, TaskRun>()
  /** Running tasks by their agent's id: the approval requests of that agent and those below it are the task's. */
  private readonly byAgent = new Map<string, TaskRun>()
  /** What each task's agent used, for `onTask`'s end. */
  private readonly usageOf = new WeakMap<TaskRun, DshUsage>()

  constructor(
    private readonly ctx: Context,
    private readonly slots: FifoSlots,
    private readonly contexts: Contexts,
    private readonly options: ExecutorOptions,
    /** The task store, the push sender and the bus manager the request handler uses: what a task's events go to between messages. */
    private readonly parts: Omit<TaskRunParts, 'keepAliveMs' | 'warn' | 'answerer'>,
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
   * A message naming a task that runs here is an answer to its `input-required` request,
   * or nothing it may take: it would start a second session on the same task, and the
   * two would share (and break) its event stream. Checked before the SDK stores the
   * message; throws the A2A error the client receives, and the running task is left
   * alone. `undefined`: the task does not run here (the SDK refuses a finished one).
   */
  admitFollowUp(message: Message, fromApprover = false): Reservation | undefined {
    const run = message.taskId ? this.running.get(message.taskId) : undefined
    return run?.admitAnswer(message, fromApprover)
  }

  /** The answer of a message whose leg never began: the task may take another. */
  releaseUntaken(taskId: string, reservation: Reservation): void {
    this.running.get(taskId)?.release(reservation)
  }

  /** Whether the agent `rootAgentId` is a task's (the approval front-end serves its requests). */
  serves(rootAgentId: string): boolean {
    return this.byAgent.has(rootAgentId)
  }

  /** Ask the caller of the task whose agent is `rootAgentId` (`input-required`). */
  ask(rootAgentId: string, request: ApprovalRequestInfo, signal: AbortSignal): Promise<FrontEndAnswer> | undefined {
    return this.byAgent.get(rootAgentId)?.ask(request, signal)
  }

  /**
   * One leg of a task (`task-run.ts`): a new task's first message starts its run; an
   * answer on a running task continues it. Either returns at the task's next stop.
   */
  execute = async (request: RequestContext, bus: ExecutionEventBus): Promise<void> => {
    const running = this.running.get(request.taskId)
    if (running) return running.continueWith(request.userMessage.messageId, bus)
    if (request.task !== undefined) return this.notRunning(request, bus)
    const run = new TaskRun(request.taskId, request.contextId, bus, request.context, { ...this.parts, keepAliveMs: this.options.keepAliveMs, answerer: this.options.answerer ?? 'caller', warn: (message) => this.ctx.logger('a2a-server').warn(message) })
    this.running.set(request.taskId, run)
    // Taken over at once, before anything is awaited: the request handler admitted the context.
    void this.runTask(request, run, this.contexts.take(request.contextId, request.taskId))
    await run.nextStop()
  }

  cancelTask = async (taskId: string, bus: ExecutionEventBus): Promise<void> => {
    const run = this.running.get(taskId)
    if (!run) {
      // Not running here (it finished, or a restart lost it): there is nothing to stop.
      return void bus.publish(statusEvent(taskId, '', TaskState.TASK_STATE_CANCELED, 'the task was not running'))
    }
    // The SDK's cancel reads the task's last events itself.
    await run.handOver()
    stop(run, new A2aServerError('TASK_CANCELLED', `task ${taskId} was cancelled by the A2A client`))
    await run.finished
  }

  /** Cancel every task and wait until each has ended (server shutdown). */
  async cancelAll(reason: string): Promise<void> {
    const runs = [...this.running.values()]
    for (const run of runs) stop(run, new A2aServerError('TASK_CANCELLED', reason))
    await Promise.all(runs.map((run) => run.finished))
  }

  /** The whole run of a task, from its first event to its final status; never rejects. */
  private async runTask(request: RequestContext, run: TaskRun, hold: ContextHold | undefined): Promise<void> {
    const about: A2aTaskAbout = { id: request.taskId, contextId: request.contextId }
    const skill = requestedSkill(request.userMessage.metadata)
    if (skill !== undefined) about.skill = skill
    const dsh = request.userMessage.metadata?.dsh
    if (isRecord(dsh) && typeof dsh.label === 'string') about.label = dsh.label
    const started = Date.now()
    this.tell({ phase: 'start', ...about })
    try {
      // A task made by another way than the request handler (which admits every new task's context) is admitted here.
      hold ??= await this.contexts.admit(request.userMessage).catch((error: unknown) => {
        this.publishRefusal(request, run, errorMessage(error))
        return undefined
      })
      if (hold) await this.runToEnd(request, run, hold)
    } catch (error) {
      this.ctx.logger('a2a-server').warn('task %s ended with an error: %s', request.taskId, errorMessage(error))
    } finally {
      hold?.release()
      this.running.delete(request.taskId)
      if (run.agentId !== undefined) this.byAgent.delete(run.agentId)
      await run.end()
      const usage = this.usageOf.get(run)
      this.tell({ phase: 'end', ...about, state: stateName(run.state), durationMs: Date.now() - started, ...(usage !== undefined && { usage }) })
    }
  }

  private tell(event: A2aTaskEvent): void {
    try {
      this.options.onTask?.(event)
    } catch (error) {
      this.ctx.logger('a2a-server').warn('onTask failed: %s', errorMessage(error))
    }
  }

  /**
   * A message naming a task that no longer runs here and was not finished when the SDK
   * read it (it ended in between): it changes nothing, and says so.
   */
  private notRunning(request: RequestContext, bus: ExecutionEventBus): void {
    const task = request.task!
    bus.publish(AgentEvent.task(task))
    const state = task.status?.state ?? TaskState.TASK_STATE_COMPLETED
    bus.publish(statusEvent(task.id, task.contextId, state, `task ${task.id} is not running on this worker any more (it is ${stateName(state)}); the message changed nothing`))
    bus.finished()
  }

  /** A task refused before it began: its first event, then `rejected`. */
  private publishRefusal(request: RequestContext, run: TaskRun, why: string): void {
    const { taskId, contextId, userMessage } = request
    run.begin({ id: taskId, contextId, status: { state: TaskState.TASK_STATE_SUBMITTED, message: undefined, timestamp: new Date().toISOString() }, artifacts: [], history: [userMessage], metadata: undefined })
    run.enter(TaskState.TASK_STATE_REJECTED, why)
  }

  private async runToEnd(request: RequestContext, run: TaskRun, hold: ContextHold): Promise<void> {
    const { taskId, contextId, userMessage } = request
    const { claim } = hold
    const { signal } = run.cancel
    const log = this.ctx.logger('a2a-server')
    run.begin({ id: taskId, contextId, status: { state: TaskState.TASK_STATE_SUBMITTED, message: undefined, timestamp: new Date().toISOString() }, artifacts: [], history: [userMessage], metadata: undefined })
    const end = (state: TaskState, note?: string, dsh?: DshStatusMetadata) => run.enter(state, note, dsh)

    const prompt = textOfMessage(userMessage)
    if (!prompt.trim()) return end(TaskState.TASK_STATE_REJECTED, 'the message has no text; send at least one text part')
    if (prompt.length > this.options.maxPromptChars) return end(TaskState.TASK_STATE_REJECTED, `the message has ${prompt.length} characters of text, more than this worker accepts (${this.options.maxPromptChars}); send less`)
    const chosen = this.helperOf(claim, requestedSkill(userMessage.metadata))
    if (typeof chosen === 'string') return end(TaskState.TASK_STATE_REJECTED, chosen)
    const helper = chosen.helper
    const lineage = callerLineage(A2A_LINEAGE.read(withTraceHeaders(userMessage.metadata, request.context?.state.get(STATE_HEADERS_KEY)), log), this.options.answerer ?? 'caller')
    // Admitted by the one served line (`@dsh/subagent`'s served.ts), by the tighter of this
    // worker's bound and the one the delegating parent inherited (for a context continued,
    // the one its session recorded).
    let admitted: AdmittedDelegation
    try {
      admitted = admitDelegation({ maxDepth: this.options.maxDepth, subject: 'this task would run', own: "this worker's" }, lineage, claim.kind === 'new' ? undefined : claim.header)
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
      run.working()
      let streamedAny = false
      let streamed = ''
      const working = (progress: DshProgress, note?: string) => run.progress({ progress: [progress] }, note)
      // The session records the bound, so the task's own delegations stay within it. Its id is the context's.
      const served = await serveDelegation(this.ctx, admitted, {
        ...helperAgent(helper),
        ...(claim.kind === 'new' ? {} : { sessionId: contextId }),
        meta: { id: contextId, origin: A2A_ORIGIN, cwd: this.options.cwd, ...(helper && { helper: { name: helper.name, hash: helper.source.hash } }) },
        provider: 'a2a',
        maxDepth: helper?.maxDepth,
        prompt,
        signal,
        opened: (agent) => {
          run.agentId = agent.id
          this.byAgent.set(agent.id, run)
          // The agents below the task, named to a dsh client so its hooks hear the whole tree.
          const stopDescendants = trackDescendants(this.ctx, agent.id, delegationName, (descendant) => run.progress({ descendants: [descendant] }))
          return () => {
            stopDescendants()
            this.byAgent.delete(agent.id)
          }
        },
        progress: {
          report: (update) => {
            switch (update.kind) {
              case 'text':
                run.publish(artifactEvent(taskId, contextId, ANSWER_ARTIFACT, update.text, streamedAny, false))
                streamedAny = true
                streamed += update.text
                return
              case 'tool-start':
                return working(update, `calling ${update.name}`)
              case 'tool-end':
                return working(update)
              default:
                return
            }
          },
        },
        // What the task's whole subtree used (its agent's calls and its children's), so the parent counts it against its budget.
        // Arguments as JSON within this wire's own bound (MAX_PROGRESS_ARGS_CHARS).
        shape: argsPreview,
        onUsage: (usage) => {
          this.usageOf.set(run, usage)
          working({ kind: 'usage', usage })
        },
        disposeFailed: (error) => log.warn('disposing the agent of task %s failed: %s', taskId, errorMessage(error)),
      })
      // The last chunk: an empty append when the stream was the answer, else the answer replacing it.
      const { answer } = served
      if (answer && answer === streamed) run.publish(artifactEvent(taskId, contextId, ANSWER_ARTIFACT, '', true, true))
      else if (answer || streamedAny) run.publish(artifactEvent(taskId, contextId, ANSWER_ARTIFACT, answer, false, true))
      const stop = served.cancelled ? 'aborted' : served.last.reason
      final = [taskStateOfStop(stop), stop === 'completed' ? undefined : `the turn ended ${served.last.reason}${served.last.error ? `: ${served.last.error}` : ''}`, served.usageReported ? { usage: served.usage } : undefined]
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

/** Stop a run: its turn is aborted, and its approval requests are rejected at once (the broker's own withdrawal follows). */
function stop(run: TaskRun, reason: A2aServerError): void {
  run.cancel.abort(reason)
  run.rejectAll('the task was cancelled')
}

/**
 * The lineage of a task as far as this worker trusts its caller. The rules a lineage carries
 * are its ancestors' levels, and an allow among them decides a side effect unasked; but any
 * caller can write them (`metadata.dsh.permissions`). A caller this worker does not trust to
 * answer its own approvals (neither `trustCallerApprovals` nor the approver) must not grant
 * itself a command either: its levels keep their ask and deny rules, which only narrow, and
 * lose their allow rules. Trusted callers (a dsh parent answering for its root's user) keep
 * them, so the root's rules apply on the worker.
 */
function callerLineage(lineage: ReceivedLineage, answerer: Answerer): ReceivedLineage {
  if (answerer === 'caller' || lineage.permissions === undefined) return lineage
  return { ...lineage, permissions: lineage.permissions.map(({ allow: _granted, ...narrowing }) => narrowing) }
}
