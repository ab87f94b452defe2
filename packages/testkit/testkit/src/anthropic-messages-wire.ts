/**
 * What the fake Messages API can be told to answer, and how an answer becomes the real wire
 * shapes (the `message` body, its SSE events, error bodies). Pure functions: the server in
 * `anthropic-messages-server.ts` only decides when to write them.
 */
import { parseJson } from './json.js'
import type { ErrorDetail } from './scripted-endpoint.js'
import { jsonFragments, textDeltas } from './stream-pieces.js'

/** The SSE event types of a streamed message, in the order the API sends them. */
export type FakeMessagesEventType = 'message_start' | 'ping' | 'content_block_start' | 'content_block_delta' | 'content_block_stop' | 'message_delta' | 'message_stop'

export interface FakeToolUse {
  /** Defaults to `toolu_fake_<request>_<index>`. */
  id?: string
  name: string
  /** A string is sent verbatim as the `partial_json` (so it may be invalid JSON); an object is JSON-encoded. */
  input: Record<string, unknown> | string
}

/** One scripted answer, consumed by one `POST /v1/messages`. */
export interface FakeMessagesResponse {
  /** Assistant text. A string streams as several `text_delta`s (about a word each); an array gives the exact deltas. */
  text?: string | string[]
  /** `tool_use` content blocks after the text; each streams its input as 2+ `input_json_delta`s. */
  toolUses?: FakeToolUse[]
  /** Defaults to `tool_use` with tool uses, else `end_turn`. */
  stopReason?: 'end_turn' | 'tool_use' | 'max_tokens' | 'stop_sequence' | 'refusal' | (string & {})
  /** Defaults to a rough estimate (characters / 4). The cache counts are sent only when given (`message_start` and `message_delta` both carry them, as the API does). */
  usage?: { inputTokens: number; outputTokens: number; cacheReadInputTokens?: number; cacheCreationInputTokens?: number }
  /** Wait this long before answering at all (before the status line). */
  delayMs?: number
  /** Wait this long between stream events. */
  eventDelayMs?: number
  /** Answer with this HTTP status and an Anthropic error body (500 when only `error` is given). */
  status?: number
  error?: string | { type?: string; message: string }
  /** Extra headers of an error answer (`retry-after`, …). */
  errorHeaders?: Record<string, string>
  /** SSE frames sent verbatim instead of the ones the answer would make (garbage, an `error` event mid-stream); each should end in its blank line. */
  rawFrames?: string[]
  /** Send this many whole events, then the first half of the next one, then destroy the socket (a stream cut mid-event). */
  cutMidEventAfter?: number
  /** Leave these event types out of the stream (e.g. `content_block_stop`, to reproduce a broken stream). */
  omitEvents?: FakeMessagesEventType[]
  /** Destroy the socket after this many SSE events (0: right after the headers). Non-streaming: no answer at all. */
  dropAfterEvents?: number
  /** Stop after this many SSE events and hold the connection open until the client hangs up or `close()`. */
  hangAfterEvents?: number
}

/** Facts of the request an answer is built for. */
export interface AnswerContext {
  /** 1-based number of the messages request on this server. */
  requestNumber: number
  model: string
  inputTokens: number
}

type ContentBlock = { type: 'text'; text: string } | { type: 'tool_use'; id: string; name: string; input: unknown }

export interface SseEvent {
  type: FakeMessagesEventType
  data: Record<string, unknown>
}

/** The SSE events of a streamed answer, with the `type` field repeated in each `data` as the API does. */
export function messageEvents(answer: FakeMessagesResponse, ctx: AnswerContext): SseEvent[] {
  const event = (type: FakeMessagesEventType, data: Record<string, unknown> = {}): SseEvent => ({ type, data: { type, ...data } })
  const usage = usageOf(answer, ctx)
  const events: SseEvent[] = [
    event('message_start', {
      message: { ...messageHead(ctx), content: [], stop_reason: null, stop_sequence: null, usage: { ...usage, output_tokens: 1 } },
    }),
    event('ping'),
  ]
  let index = 0
  const text = deltasOf(answer.text)
  if (text.length > 0) {
    events.push(event('content_block_start', { index, content_block: { type: 'text', text: '' } }))
    for (const piece of text) events.push(event('content_block_delta', { index, delta: { type: 'text_delta', text: piece } }))
    events.push(event('content_block_stop', { index }))
    index++
  }
  for (const use of toolUsesOf(answer, ctx)) {
    events.push(event('content_block_start', { index, content_block: { type: 'tool_use', id: use.id, name: use.name, input: {} } }))
    for (const piece of jsonFragments(use.json)) events.push(event('content_block_delta', { index, delta: { type: 'input_json_delta', partial_json: piece } }))
    events.push(event('content_block_stop', { index }))
    index++
  }
  events.push(event('message_delta', { delta: { stop_reason: stopReasonOf(answer), stop_sequence: null }, usage: { ...cacheCountsOf(answer), output_tokens: usage.output_tokens } }))
  events.push(event('message_stop'))
  const omitted = new Set(answer.omitEvents ?? [])
  return events.filter((each) => !omitted.has(each.type))
}

/** The non-streaming `message` body. */
export function messageBody(answer: FakeMessagesResponse, ctx: AnswerContext): Record<string, unknown> {
  const content: ContentBlock[] = []
  const text = deltasOf(answer.text).join('')
  if (text) content.push({ type: 'text', text })
  for (const use of toolUsesOf(answer, ctx)) content.push({ type: 'tool_use', id: use.id, name: use.name, input: parseJson(use.json) ?? {} })
  return { ...messageHead(ctx), content, stop_reason: stopReasonOf(answer), stop_sequence: null, usage: usageOf(answer, ctx) }
}

function messageHead(ctx: AnswerContext) {
  return { id: `msg_fake_${ctx.requestNumber}`, type: 'message', role: 'assistant', model: ctx.model }
}

interface ResolvedToolUse {
  id: string
  name: string
  json: string
}

function toolUsesOf(answer: FakeMessagesResponse, ctx: AnswerContext): ResolvedToolUse[] {
  return (answer.toolUses ?? []).map((use, index) => ({
    id: use.id ?? `toolu_fake_${ctx.requestNumber}_${index}`,
    name: use.name,
    json: typeof use.input === 'string' ? use.input : JSON.stringify(use.input),
  }))
}

function stopReasonOf(answer: FakeMessagesResponse): string {
  return answer.stopReason ?? (answer.toolUses?.length ? 'tool_use' : 'end_turn')
}

function usageOf(answer: FakeMessagesResponse, ctx: AnswerContext): { input_tokens: number; output_tokens: number; cache_read_input_tokens?: number; cache_creation_input_tokens?: number } {
  if (answer.usage) return { input_tokens: answer.usage.inputTokens, output_tokens: answer.usage.outputTokens, ...cacheCountsOf(answer) }
  const output = deltasOf(answer.text).join('') + toolUsesOf(answer, ctx).map((use) => use.name + use.json).join('')
  return { input_tokens: ctx.inputTokens, output_tokens: Math.max(1, estimateTokens(output)) }
}

function cacheCountsOf(answer: FakeMessagesResponse): { cache_read_input_tokens?: number; cache_creation_input_tokens?: number } {
  const usage = answer.usage
  return {
    ...(usage?.cacheReadInputTokens !== undefined && { cache_read_input_tokens: usage.cacheReadInputTokens }),
    ...(usage?.cacheCreationInputTokens !== undefined && { cache_creation_input_tokens: usage.cacheCreationInputTokens }),
  }
}

/** The body shape the Anthropic API (and SDK) use for errors. */
export function errorBody(status: number, detail: ErrorDetail): { type: 'error'; error: { type: string; message: string } } {
  return { type: 'error', error: { type: detail.type ?? errorTypeFor(status), message: detail.message } }
}

/** The error types the API uses for each status, so clients classify fake errors as they would real ones. */
function errorTypeFor(status: number): string {
  switch (status) {
    case 400:
      return 'invalid_request_error'
    case 401:
      return 'authentication_error'
    case 403:
      return 'permission_error'
    case 404:
      return 'not_found_error'
    case 413:
      return 'request_too_large'
    case 429:
      return 'rate_limit_error'
    case 529:
      return 'overloaded_error'
    default:
      return status >= 500 ? 'api_error' : 'invalid_request_error'
  }
}

export function promptText(body: Record<string, unknown>): string {
  return JSON.stringify([body.system ?? '', body.messages ?? ''])
}

export function estimateTokens(text: string): number {
  return Math.ceil(text.length / 4)
}

/** Empty pieces are dropped, so `text: ['']` gives no text block at all. */
function deltasOf(text: string | string[] | undefined): string[] {
  if (text === undefined) return []
  return Array.isArray(text) ? text.filter((piece) => piece.length > 0) : textDeltas(text)
}
