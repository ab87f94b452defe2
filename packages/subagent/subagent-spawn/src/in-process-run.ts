import { errorMessage, rejectOnThrow } from '@dsh/base'
/**
 * The driver both in-process providers share: create a child agent with lineage in its
 * session header, apply the start-time features in its setup (so a bad filter rolls the
 * child back before anyone sees it), run one turn, and read the result from the child's
 * own events.
 */
import type { Context } from 'cordis'
import type { Agent, AgentOptions, AgentRegistry, CreateAgentOptions, TurnResult } from '@dsh/agent'
import type { AssistantMessage } from '@dsh/llm'
import type { Session } from '@dsh/session'
import { effectiveMaxDepth, refuseDisposedParent, refuseUnstartable, SubagentError, selectOutput, type SubagentRequest, type SubagentResult, type SubagentRun } from '@dsh/subagent'
import { registerStructuredOutput, STRUCTURED_OUTPUT_TOOL, type StructuredSlot } from './structured-output.js'

export interface InProcessOptions {
  /** The provider's registered name, recorded in the child's header. */
  provider: string
  /** Share the parent's completed turns (fork). */
  seed?: { session: Session; length: number }
}

/**
 * Start a child's run. Not an async function: every child of a fan-out passes here, and
 * an async function would cost each a frame and a tick around the agent's creation.
 */
export function startInProcessRun(agents: AgentRegistry, request: SubagentRequest, options: InProcessOptions): Promise<SubagentRun> {
  // As from an async function: a refused request rejects, it is not thrown at the caller.
  return rejectOnThrow(() => startChecked(agents, request, options))
}

function startChecked(agents: AgentRegistry, request: SubagentRequest, options: InProcessOptions): Promise<SubagentRun> {
  const { parent, signal } = request
  refuseUnstartable(request, 'the child')
  const depth = parent.depth + 1
  // Recorded in the child's header, so its own delegations stay within the bound.
  const maxDepth = effectiveMaxDepth(request)

  let structured: StructuredSlot | undefined
  // Optional parts are set one by one: an object literal spreading conditional parts
  // (`...(persona && { persona })`) takes V8's generic copy, which a fan-out pays per child.
  const agentOptions: AgentOptions = { model: request.agentOptions?.model ?? parent.options.model }
  // A persona is given to one child: that child's own children start from the deployment
  // persona again unless their delegation names one.
  if (request.persona !== undefined) agentOptions.persona = request.persona
  const createOptions: CreateAgentOptions = {
    seed: options.seed,
    parent,
    signal,
    // Every key present (absent ones undefined, which the store skips): one object shape
    // for every child, so copying it on the way to the session store stays cheap.
    meta: {
      parentSession: parent.id,
      origin: 'subagent',
      delegationDepth: depth,
      maxDepth,
      provider: options.provider,
      cwd: parent.session.header.cwd,
      label: request.label,
      toolCallId: request.callId,
    },
    agentOptions,
  }
  // Only a child that needs scoped registrations pays for its own framework context.
  if (request.outputSchema || request.toolFilter) {
    createOptions.setup = (childCtx: Context, agent: Agent) => {
      if (request.outputSchema) structured = registerStructuredOutput(childCtx, request.outputSchema)
      if (request.toolFilter) {
        // The schema tool is the child's way to answer: a filter never hides it.
        const allow = request.toolFilter.allow && (structured ? [...request.toolFilter.allow, STRUCTURED_OUTPUT_TOOL] : request.toolFilter.allow)
        childCtx.tools.restrict(agent.id, { ...request.toolFilter, allow })
      }
    }
  }
  return agents.create(createOptions).then(
    (child) => published(child, request, structured),
    (error: unknown) => {
      if (error instanceof SubagentError) throw error
      if (signal.aborted) throw new SubagentError('ABORTED', 'the delegation was cancelled while the child was being created', { cause: error })
      throw new SubagentError('START_FAILED', `the child could not be started: ${errorMessage(error)}`, { cause: error })
    },
  )
}

/** The run of a created child; or, when the delegation can no longer stand, the child disposed and the refusal. */
function published(child: Agent, request: SubagentRequest, structured: StructuredSlot | undefined): SubagentRun | Promise<never> {
  const { parent, signal } = request
  // The parent began disposing while the child was created: the child would outlive it.
  try {
    refuseDisposedParent(parent)
  } catch (error) {
    return disposedThenRefused(child, error)
  }
  // An abort that landed while create() resolved has no listener to hear it yet.
  if (signal.aborted) {
    return disposedThenRefused(child, new SubagentError('ABORTED', 'the delegation was cancelled while the child was being created', { cause: signal.reason }))
  }
  return new InProcessRun(child, signal, request.prompt, structured, request.outputSchema !== undefined)
}

async function disposedThenRefused(child: Agent, refusal: unknown): Promise<never> {
  await child.dispose()
  throw refusal
}

/**
 * A published in-process run. Its behaviour lives on the prototype: a run is made per
 * child, and a thousand live children should not each hold half a dozen closures.
 */
class InProcessRun implements SubagentRun {
  readonly id: string
  readonly local = true
  readonly result: Promise<SubagentResult>
  /**
   * Set as the tracked turn ends (before anyone sees the result): a steer after that
   * would start a turn nobody tracks or bills to this run.
   */
  private settled = false
  private disposal: Promise<void> | undefined
  private readonly onAbort: () => void

  constructor(
    private readonly child: Agent,
    private readonly signal: AbortSignal,
    prompt: SubagentRequest['prompt'],
    structured: StructuredSlot | undefined,
    wantsStructured: boolean,
  ) {
    this.id = child.id
    this.onAbort = () => child.cancel(signal.reason)
    signal.addEventListener('abort', this.onAbort, { once: true })
    this.result = child.followup({ role: 'user', content: prompt }).then(
      (ended): SubagentResult => {
        this.settled = true
        return resultOf(child, ended, structured, wantsStructured)
      },
      (error: unknown): SubagentResult => {
        this.settled = true
        return { output: [], stopReason: 'error', diagnostic: `the child's turn never ran: ${errorMessage(error)}` }
      },
    )
  }

  cancel(reason?: unknown): void {
    this.child.cancel(reason)
  }

  sendMessage(message: string): void {
    if (this.settled) {
      throw new SubagentError('RUN_SETTLED', `the run of child ${this.child.id} has already ended; start a new delegation to give it more work`)
    }
    this.child.steer(message)
  }

  dispose(): Promise<void> {
    if (this.disposal === undefined) {
      this.signal.removeEventListener('abort', this.onAbort)
      this.disposal = this.child.dispose()
    }
    return this.disposal
  }
}

function resultOf(child: Agent, ended: TurnResult, structured: StructuredSlot | undefined, wantsStructured: boolean): SubagentResult {
  const output = selectOutput(lastAnswer(child.session))
  // Built key by key, not by spreads with extra keys (V8's generic copy, paid per child).
  const result: SubagentResult = { output, stopReason: ended.reason }
  if (structured?.received) result.structured = structured.value
  if (result.stopReason === 'completed' && wantsStructured && !structured?.received) {
    result.stopReason = 'error'
    result.diagnostic = `the child finished without a valid ${STRUCTURED_OUTPUT_TOOL} call`
  } else if (result.stopReason !== 'completed') {
    result.diagnostic = ended.error ?? `the child's turn ended ${ended.reason}`
  }
  return result
}

/**
 * The last assistant message the child produced itself that has text (a fork's seeded
 * parent text is never its answer), as the one message `selectOutput` needs to see: it
 * picks the last message with text, so scanning from the end gives the same answer
 * without walking (or copying) the rest.
 */
function lastAnswer(session: Session): AssistantMessage[] {
  const own = session.ownEvents()
  for (let index = own.length - 1; index >= 0; index--) {
    const event = own[index]!
    if (event.type === 'assistant/message' && event.message.content.some((block) => block.type === 'text' && block.text.length > 0)) return [event.message]
  }
  return []
}
