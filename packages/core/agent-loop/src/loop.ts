/**
 * The default turn driver, readable top to bottom: a turn is steps until nothing is
 * owed; a step logs the claimed input, streams one model response, runs its tool calls
 * and logs their results in model order. Every durable fact goes into the session log,
 * and the model's next request is derived from that log alone.
 */
import { assertNever, errorMessage, isAbortError, stopReasonOfFinish, StopRequest } from '@dsh/base'
import {
  type AssistantMessage,
  type FinishReason,
  type LlmChunk,
  type LlmService,
  type ToolCallBlock,
  type Usage,
  type UserMessage,
} from '@dsh/llm'
import type { Session, SessionEventBody, StopReason } from '@dsh/session'
import type { ToolCallOutcome, ToolRegistry } from '@dsh/tools'
import type { TurnResult, TurnRuntime } from '@dsh/agent'

export interface LoopServices {
  llm: LlmService
  tools: ToolRegistry
}

type AssistantMessageEvent = Extract<SessionEventBody, { type: 'assistant/message' }>

type TextDelta = Extract<LlmChunk, { type: 'text-delta' | 'reasoning-delta' }>

/**
 * What the loop does after a step's response, decided in one place (`closeResponse`,
 * `toolsDone`): run the response's tool calls, take another step, or end the turn.
 */
export type NextStep =
  | { readonly kind: 'run-tools'; readonly calls: ToolCallBlock[] }
  | { readonly kind: 'next-step' }
  | { readonly kind: 'end'; readonly result: TurnResult }

/** Shared: a step that asks for another one carries nothing of its own. */
const NEXT_STEP: NextStep = Object.freeze({ kind: 'next-step' })

/** What the chunks of one response add up to, folded one by one; one per turn, reset at each step. */
class ResponseFold {
  text = ''
  reasoning = ''
  calls: ToolCallBlock[] | undefined
  finish: FinishReason | undefined
  usage: Usage | undefined
  /** The model that answered, recorded with its usage (what a price table is keyed by). */
  spec: string | undefined
  /** Set when the stream failed (provider error, bad model spec). */
  error: string | undefined
  aborted = false

  /** Empty again, for the next step's response. */
  reset(): void {
    this.text = ''
    this.reasoning = ''
    this.calls = undefined
    this.finish = undefined
    this.usage = undefined
    this.spec = undefined
    this.error = undefined
    this.aborted = false
  }

  /** Fold `chunk` in; true when it is a live text fragment (which listeners may hear). */
  add(chunk: LlmChunk): chunk is TextDelta {
    switch (chunk.type) {
      case 'text-delta':
        this.text += chunk.text
        return true
      case 'reasoning-delta':
        this.reasoning += chunk.text
        return true
      case 'tool-call':
        ;(this.calls ??= []).push(chunk.call)
        return false
      case 'usage':
        this.usage = chunk.usage
        return false
      case 'finish':
        this.finish = chunk.reason
        return false
      default:
        return assertNever(chunk, 'stream chunk')
    }
  }

  /** The response as folded, once its stream has ended. */
  response(): Response {
    const { text, reasoning, calls, finish, usage, spec, error, aborted } = this
    const content: AssistantMessage['content'] = []
    if (reasoning) content.push({ type: 'reasoning', text: reasoning })
    if (text) content.push({ type: 'text', text })
    // Calls from an interrupted response are dropped: they have no result and were never run.
    if (!aborted && error === undefined && calls !== undefined) content.push(...calls)
    const response: Response = { message: { role: 'assistant', content }, aborted }
    if (finish) response.finish = finish
    // An adapter that knows better (a replay of a recorded run) names the answering model itself.
    if (usage) response.usage = spec === undefined || usage.model !== undefined ? usage : withModel(usage, spec)
    if (error !== undefined) response.error = error
    return response
  }
}

/** One streamed response, folded. */
interface Response {
  message: AssistantMessage
  finish?: FinishReason
  usage?: Usage
  /** Set when the stream failed (provider error, bad model spec). */
  error?: string
  aborted: boolean
}

/**
 * Runs one turn. This function is what stays suspended while a turn waits on its model or
 * its tools, and an async function's suspended frame keeps every register the whole
 * function uses: so it holds only the waiting (the stream, the tools) and hands each
 * synchronous part to a `TurnSteps` method. A fan-out keeps one such frame per child alive
 * at once, and every garbage collection during it copies them.
 */
export async function runTurn(services: LoopServices, runtime: TurnRuntime, input: UserMessage[], signal: AbortSignal): Promise<TurnResult> {
  const turn = new TurnSteps(services, runtime, input, signal)
  try {
    for (;;) {
      const ended = turn.openStep()
      if (ended) return ended
      try {
        // The stream is read here rather than in a helper so no second frame waits with this one.
        for await (const chunk of turn.requestResponse()) if (turn.fold(chunk)) break
        turn.streamEnded()
      } catch (caught) {
        turn.streamFailed(caught)
      }
      let next = turn.closeResponse()
      if (next.kind === 'run-tools') next = turn.toolsDone(await services.tools.executeAll(next.calls, { signal, agent: runtime.agent }))
      if (next.kind === 'end') return next.result
    }
  } catch (error) {
    return turn.failed(error)
  }
}

/**
 * The synchronous parts of one turn, in the order `runTurn` calls them, and what they
 * share: the turn's number and first sequence, the step, the input not yet logged, and the
 * response being folded.
 */
class TurnSteps {
  private readonly session: Session
  private readonly turn: number
  private readonly startSeq: number
  private pending: UserMessage[]
  private step = 0
  private stepOpen = false
  /** The response of the open step, while it streams. */
  private readonly folded = new ResponseFold()
  /** The ending the open step's response forces (cut off, filtered), once it is logged. */
  private forcedEnd: StopReason | undefined
  /** The calls of the open step once its response is logged (kept for its end). */
  private calls: ToolCallBlock[] = NO_CALLS

  constructor(
    private readonly services: LoopServices,
    private readonly runtime: TurnRuntime,
    input: UserMessage[],
    private readonly signal: AbortSignal,
  ) {
    this.session = runtime.agent.session
    this.turn = runtime.nextTurnNumber()
    this.startSeq = this.session.append({ type: 'turn/start', turn: this.turn }).seq
    this.pending = input
  }

  /** Open the next step and log its input; or end the turn (aborted, out of steps). */
  openStep(): TurnResult | undefined {
    const { session, runtime } = this
    if (this.signal.aborted) return this.aborted()
    if (this.step >= runtime.maxSteps) return this.end('error', `the turn reached its limit of ${runtime.maxSteps} steps`)
    const step = ++this.step
    session.append({ type: 'step/start', step })
    this.stepOpen = true
    const claimed = runtime.claimInput()
    // Indexed loops here and below: until the code is optimised, for-of makes an iterator
    // per loop, and every child of a fan-out runs these at least once.
    const { pending } = this
    for (let index = 0; index < pending.length; index++) session.append({ type: 'user/message', message: pending[index]! })
    for (let index = 0; index < claimed.length; index++) session.append({ type: 'user/message', message: claimed[index]! })
    this.pending = NO_INPUT
    this.folded.reset()
    return undefined
  }

  /** The model's stream for this step, requested from the log. */
  requestResponse(): AsyncIterable<LlmChunk> {
    const { runtime, services } = this
    const { agent } = runtime
    const { session } = agent
    const { folded } = this
    const { adapter, model } = services.llm.resolve(agent.options.model)
    folded.spec = `${adapter.name}:${model}`
    return adapter.stream({
      model,
      system: runtime.system,
      messages: session.messages(),
      tools: services.tools.specsFor(agent.id),
      signal: this.signal,
      origin: { sessionId: session.id },
    })
  }

  /** Fold one chunk in; true when the stream must stop (the turn was aborted). */
  fold(chunk: LlmChunk): boolean {
    const { session } = this
    // A live fragment is built only when somebody listens (most children have nobody).
    if (this.folded.add(chunk) && session.listened) session.publish({ type: 'assistant/chunk', kind: chunk.type === 'text-delta' ? 'text' : 'reasoning', text: chunk.text })
    return this.signal.aborted
  }

  streamEnded(): void {
    if (this.signal.aborted) this.folded.aborted = true
  }

  /** The request or its stream failed (provider error, bad model spec) or was aborted. */
  streamFailed(caught: unknown): void {
    const { folded } = this
    if (this.signal.aborted || isAbortError(caught)) folded.aborted = true
    else folded.error = errorMessage(caught)
  }

  /** Log the folded response, then decide what follows it. */
  closeResponse(): NextStep {
    const { session } = this
    const response = this.folded.response()
    if (response.message.content.length > 0 || (response.error === undefined && !response.aborted)) {
      session.append(assistantEvent(response))
    }
    if (response.error !== undefined) {
      this.closeStep()
      return ending(this.end('error', response.error))
    }
    if (response.aborted) {
      this.closeStep()
      return ending(this.aborted())
    }
    // The response's calls are the folded ones (an aborted or failed response, which drops
    // them, has returned above): no filtered copy of its content.
    const calls = this.folded.calls ?? NO_CALLS
    // A finish that ends the turn by itself (cut off, filtered) is decided in one place.
    const forcedEnd = response.finish === undefined ? undefined : stopReasonOfFinish(response.finish)
    this.forcedEnd = forcedEnd
    this.calls = calls
    if (calls.length === 0) return this.stepDone(false)
    for (let index = 0; index < calls.length; index++) session.append({ type: 'tool/call', call: calls[index]! })
    if (!forcedEnd) return { kind: 'run-tools', calls }
    // A response cut off by the token limit (or filtered) may carry calls the model never
    // meant to send as they are: fail them instead of executing them.
    for (const call of calls) session.append({ type: 'tool/result', result: unrunResult(call, forcedEnd) })
    return this.stepDone(false)
  }

  /** Log the results of the step's calls, in model order; then as `stepDone`. */
  toolsDone(outcomes: readonly ToolCallOutcome[]): NextStep {
    const { session } = this
    let endsTurn = false
    for (let index = 0; index < outcomes.length; index++) {
      const outcome = outcomes[index]!
      session.append(resultEvent(outcome))
      if (outcome.endsTurn) endsTurn = true
    }
    return this.stepDone(endsTurn)
  }

  /** Close the step: the turn ends here, or another step follows. */
  private stepDone(endsTurn: boolean): NextStep {
    this.closeStep()
    if (this.signal.aborted) return ending(this.aborted())
    if (this.forcedEnd) return ending(this.end(this.forcedEnd))
    if (endsTurn) return ending(this.end('completed'))
    if (this.calls.length === 0 && !this.runtime.hasInbox()) return ending(this.end('completed'))
    return NEXT_STEP
  }

  /** Only a bug or a released session lands here; the turn still ends in the log if it can. */
  failed(error: unknown): TurnResult {
    const { session } = this
    if (this.stepOpen && !session.released) this.closeStep()
    const message = errorMessage(error)
    if (session.released) return { turn: this.turn, reason: 'error', error: message, startSeq: this.startSeq, endSeq: this.startSeq }
    return this.end('error', message)
  }

  private closeStep(): void {
    this.session.append({ type: 'step/end', step: this.step })
    this.stepOpen = false
  }

  /** The ending of an aborted turn: `aborted`, or what the `StopRequest` that stopped it says (a budget). */
  private aborted(): TurnResult {
    const why: unknown = this.signal.reason
    return why instanceof StopRequest ? this.end(why.stopReason, why.message) : this.end('aborted')
  }

  private end(reason: StopReason, error?: string): TurnResult {
    const { session, turn, startSeq } = this
    this.runtime.endingTurn()
    const ended = session.append(error === undefined ? { type: 'turn/end', turn, reason } : { type: 'turn/end', turn, reason, error })
    return error === undefined ? { turn, reason, startSeq, endSeq: ended.seq } : { turn, reason, error, startSeq, endSeq: ended.seq }
  }
}

function ending(result: TurnResult): NextStep {
  return { kind: 'end', result }
}

const NO_INPUT: UserMessage[] = []
const NO_CALLS: ToolCallBlock[] = []

/**
 * The logged form of a response. Optional keys are set one by one: an object literal that
 * spreads conditional parts (`...(finish && { finish })`) takes V8's generic copy, which
 * every child of a fan-out would pay for.
 */
function assistantEvent(response: Response): AssistantMessageEvent {
  const event: AssistantMessageEvent = { type: 'assistant/message', message: response.message }
  if (response.finish) event.finish = response.finish
  if (response.usage) event.usage = response.usage
  return event
}

/**
 * `usage` naming the model that answered, built field by field: a clone of it followed by
 * one more key takes V8's generic copy (half a microsecond to three, on every response).
 */
function withModel(usage: Usage, model: string): Usage {
  const { inputTokens, outputTokens, cacheHitInputTokens, cacheWriteInputTokens } = usage
  if (cacheWriteInputTokens !== undefined) return { inputTokens, outputTokens, ...(cacheHitInputTokens !== undefined && { cacheHitInputTokens }), cacheWriteInputTokens, model }
  return cacheHitInputTokens === undefined ? { inputTokens, outputTokens, model } : { inputTokens, outputTokens, cacheHitInputTokens, model }
}

function unrunResult(call: ToolCallBlock, reason: StopReason) {
  const why = reason === 'max-tokens' ? 'the response was cut off by the token limit' : `the response ended the turn (${reason})`
  return {
    type: 'tool-result' as const,
    callId: call.id,
    name: call.name,
    content: [{ type: 'text' as const, text: `${call.name} was not run: ${why}` }],
    isError: true,
  }
}

/** The `tool/result` event of one outcome: its permission and the tool's record only when it has them. */
function resultEvent(outcome: ToolCallOutcome): Extract<SessionEventBody, { type: 'tool/result' }> {
  const event: Extract<SessionEventBody, { type: 'tool/result' }> = { type: 'tool/result', result: outcome.result }
  if (outcome.permission) event.permission = outcome.permission
  if (outcome.record !== undefined) event.record = outcome.record
  return event
}
