/**
 * The default turn driver, readable top to bottom: a turn is steps until nothing is
 * owed; a step logs the claimed input, streams one model response, runs its tool calls
 * and logs their results in model order. Every durable fact goes into the session log,
 * and the model's next request is derived from that log alone.
 */
import { assertNever, errorMessage, isAbortError, turnEndOfFinish } from '@dsh/base'
import {
  toolCallsOf,
  type AssistantMessage,
  type FinishReason,
  type LlmChunk,
  type LlmService,
  type ToolCallBlock,
  type Usage,
  type UserMessage,
} from '@dsh/llm'
import type { Session, SessionEventBody, TurnEndReason } from '@dsh/session'
import type { ToolRegistry } from '@dsh/tools'
import type { TurnResult, TurnRuntime } from '@dsh/agent'

export interface LoopServices {
  llm: LlmService
  tools: ToolRegistry
}

type AssistantMessageEvent = Extract<SessionEventBody, { type: 'assistant/message' }>

type TextDelta = Extract<LlmChunk, { type: 'text-delta' | 'reasoning-delta' }>

/** What the chunks of one response add up to, folded one by one. */
class ResponseFold {
  text = ''
  reasoning = ''
  calls: ToolCallBlock[] | undefined
  finish: FinishReason | undefined
  usage: Usage | undefined

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

export async function runTurn(services: LoopServices, runtime: TurnRuntime, input: UserMessage[], signal: AbortSignal): Promise<TurnResult> {
  const { session } = runtime.agent
  const turn = runtime.nextTurnNumber()
  const started = session.append({ type: 'turn/start', turn })
  const end = (reason: TurnEndReason, error?: string): TurnResult => {
    runtime.endingTurn()
    const ended = session.append(error === undefined ? { type: 'turn/end', turn, reason } : { type: 'turn/end', turn, reason, error })
    return error === undefined
      ? { turn, reason, startSeq: started.seq, endSeq: ended.seq }
      : { turn, reason, error, startSeq: started.seq, endSeq: ended.seq }
  }

  let pending = input
  let step = 0
  let stepOpen = false
  try {
    for (;;) {
      if (signal.aborted) return end('aborted')
      if (step >= runtime.maxSteps) return end('error', `the turn reached its limit of ${runtime.maxSteps} steps`)
      step++
      session.append({ type: 'step/start', step })
      stepOpen = true
      const claimed = runtime.claimInput()
      for (const message of pending) session.append({ type: 'user/message', message })
      for (const message of claimed) session.append({ type: 'user/message', message })
      pending = []

      const response = await streamResponse(services, runtime, signal)
      if (response.message.content.length > 0 || (response.error === undefined && !response.aborted)) {
        session.append(assistantEvent(response))
      }
      if (response.error !== undefined) {
        closeStep(session, step)
        return end('error', response.error)
      }
      if (response.aborted) {
        closeStep(session, step)
        return end('aborted')
      }

      const calls = toolCallsOf(response.message)
      // A finish that ends the turn by itself (cut off, filtered) is decided in one place.
      const forcedEnd = response.finish === undefined ? undefined : turnEndOfFinish(response.finish)
      let endsTurn = false
      if (calls.length > 0) {
        for (const call of calls) session.append({ type: 'tool/call', call })
        if (forcedEnd) {
          // A response cut off by the token limit (or filtered) may carry calls the model
          // never meant to send as they are: fail them instead of executing them.
          for (const call of calls) session.append({ type: 'tool/result', result: unrunResult(call, forcedEnd) })
        } else {
          const outcomes = await services.tools.executeAll(calls, { signal, agent: runtime.agent })
          for (const outcome of outcomes) session.append(outcome.permission ? { type: 'tool/result', result: outcome.result, permission: outcome.permission } : { type: 'tool/result', result: outcome.result })
          endsTurn = outcomes.some((outcome) => outcome.endsTurn)
        }
      }
      closeStep(session, step)
      stepOpen = false

      if (signal.aborted) return end('aborted')
      if (forcedEnd) return end(forcedEnd)
      if (endsTurn) return end('completed')
      if (calls.length === 0 && !runtime.hasInbox()) return end('completed')
    }
  } catch (error) {
    // Only a bug or a released session lands here; the turn still ends in the log if it can.
    if (stepOpen && !session.released) closeStep(session, step)
    const message = errorMessage(error)
    if (session.released) return { turn, reason: 'error', error: message, startSeq: started.seq, endSeq: started.seq }
    return end('error', message)
  }
}

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
  const { inputTokens, outputTokens, cacheHitInputTokens } = usage
  return cacheHitInputTokens === undefined ? { inputTokens, outputTokens, model } : { inputTokens, outputTokens, cacheHitInputTokens, model }
}

function closeStep(session: Session, step: number): void {
  session.append({ type: 'step/end', step })
}

function unrunResult(call: ToolCallBlock, reason: TurnEndReason) {
  const why = reason === 'max-tokens' ? 'the response was cut off by the token limit' : `the response ended the turn (${reason})`
  return {
    type: 'tool-result' as const,
    callId: call.id,
    name: call.name,
    content: [{ type: 'text' as const, text: `${call.name} was not run: ${why}` }],
    isError: true,
  }
}

async function streamResponse(services: LoopServices, runtime: TurnRuntime, signal: AbortSignal): Promise<Response> {
  const { agent } = runtime
  const { session } = agent
  const folded = new ResponseFold()
  let error: string | undefined
  let aborted = false
  /** The model that answered, recorded with its usage (what a price table is keyed by). */
  let spec: string | undefined
  try {
    const { adapter, model } = services.llm.resolve(agent.options.model)
    spec = `${adapter.name}:${model}`
    const stream = adapter.stream({
      model,
      system: runtime.system,
      messages: session.messages(),
      tools: services.tools.specsFor(agent.id),
      signal,
      origin: { sessionId: session.id },
    })
    for await (const chunk of stream) {
      // A live fragment is built only when somebody listens (most children have nobody).
      if (folded.add(chunk) && session.listened) session.publish({ type: 'assistant/chunk', kind: chunk.type === 'text-delta' ? 'text' : 'reasoning', text: chunk.text })
      if (signal.aborted) break
    }
    if (signal.aborted) aborted = true
  } catch (caught) {
    if (signal.aborted || isAbortError(caught)) aborted = true
    else error = errorMessage(caught)
  }

  const { text, reasoning, calls, finish, usage } = folded
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
