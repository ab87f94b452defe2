/**
 * The one-shot run of an in-process child, which both in-process providers share: the
 * child comes from `@dsh/subagent`'s one in-process child factory (lineage, model,
 * persona, tool filter, admission), this file adds the structured-output tool, runs one
 * turn and reads the result from the child's own events.
 */
import { errorMessage } from '@dsh/base'
import type { Agent, AgentRegistry, TurnResult } from '@dsh/agent'
import type { AssistantMessage } from '@dsh/llm'
import type { Session } from '@dsh/session'
import { createInProcessChildAnd, SubagentError, selectOutput, type SubagentRequest, type SubagentResult, type SubagentRun } from '@dsh/subagent'
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
  // A throw becomes a rejection, as from an async function (no closure made for it per child).
  try {
    const { outputSchema } = request
    if (outputSchema === undefined) return createInProcessChildAnd(agents, request, options, (child) => new InProcessRun(child, request, undefined))
    let structured: StructuredSlot | undefined
    const setup = (childCtx: Parameters<typeof registerStructuredOutput>[0]) => {
      structured = registerStructuredOutput(childCtx, outputSchema)
      // The schema tool is the child's way to answer: a filter never hides it.
      return [STRUCTURED_OUTPUT_TOOL]
    }
    return createInProcessChildAnd(agents, request, { ...options, setup }, (child) => new InProcessRun(child, request, structured ?? { received: false }))
  } catch (error) {
    return Promise.reject(error)
  }
}

/**
 * The runs following each delegation signal, heard through one listener per signal: the
 * run itself while it is the only one (a delegation of its own), a set once there are
 * more. A fan-out's calls share a few signals (the tools' relays, see
 * `ToolRegistry.executeAll`), and a listener of its own per run would cost each child
 * Node's `Listener`, the closure Node wraps a `handleEvent` object in, and a walk of the
 * signal's list to add and remove.
 */
const followers = new WeakMap<AbortSignal, InProcessRun | Set<InProcessRun>>()

/** Listener options shared by every signal followed. */
const ONCE = Object.freeze({ once: true })

function follow(signal: AbortSignal, run: InProcessRun): void {
  const present = followers.get(signal)
  if (present === undefined) {
    followers.set(signal, run)
    signal.addEventListener('abort', cancelFollowers, ONCE)
  } else if (present instanceof Set) present.add(run)
  else followers.set(signal, new Set([present, run]))
}

function unfollow(signal: AbortSignal, run: InProcessRun): void {
  const present = followers.get(signal)
  if (present !== run && !(present instanceof Set && present.delete(run) && present.size === 0)) return
  followers.delete(signal)
  signal.removeEventListener('abort', cancelFollowers)
}

/** A followed signal aborted: cancel every run following it, in the order they started, with its reason. */
function cancelFollowers(event: Event): void {
  const signal = event.target as AbortSignal
  const present = followers.get(signal)
  followers.delete(signal)
  if (present === undefined) return
  if (!(present instanceof Set)) return present.cancel(signal.reason)
  for (const run of present) {
    try {
      run.cancel(signal.reason)
    } catch (error) {
      // As a listener of its own would have failed: reported, and the other runs still cancelled.
      process.nextTick(() => {
        throw error
      })
    }
  }
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
  private readonly signal: AbortSignal

  constructor(
    private readonly child: Agent,
    request: SubagentRequest,
    /** Present when the request asked for structured output. */
    structured: StructuredSlot | undefined,
  ) {
    const { signal } = request
    this.id = child.id
    this.signal = signal
    follow(signal, this)
    this.result = child.followup({ role: 'user', content: request.prompt }).then(
      (ended): SubagentResult => {
        this.settled = true
        return resultOf(child, ended, structured)
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
      unfollow(this.signal, this)
      this.disposal = this.child.dispose()
    }
    return this.disposal
  }
}

function resultOf(child: Agent, ended: TurnResult, structured: StructuredSlot | undefined): SubagentResult {
  const output = selectOutput(lastAnswer(child.session))
  // Built key by key, not by spreads with extra keys (V8's generic copy, paid per child).
  const result: SubagentResult = { output, stopReason: ended.reason }
  if (structured?.received) result.structured = structured.value
  if (result.stopReason === 'completed' && structured !== undefined && !structured.received) {
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
