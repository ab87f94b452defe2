/**
 * A fake Anthropic Messages API on 127.0.0.1 that speaks the real wire format, so the
 * real Claude Code binary (through the Claude Agent SDK) can be driven from a script.
 * `POST /v1/messages` consumes the next scripted answer; the rest of the API surface a
 * client may touch is answered without consuming anything, and every request is recorded.
 */
import { assertNever } from '@dsh/base'
import { errorBody, estimateTokens, messageBody, messageEvents, promptText, type AnswerContext, type FakeMessagesResponse } from './anthropic-messages-wire.js'
import { startScriptedEndpoint, type EndpointDescription, type RecordedRequest, type Turn } from './scripted-endpoint.js'

/** A scripted answer, or a function that builds one from the request it answers. */
export type FakeMessagesAnswer = FakeMessagesResponse | ((request: RecordedAnthropicRequest) => FakeMessagesResponse)

export interface RecordedAnthropicRequest extends RecordedRequest {
  /** `messages` (a model request, consumes the script), `count_tokens`, or `other` (answered 404). */
  kind: 'messages' | 'count_tokens' | 'other'
}

export interface FakeAnthropicMessages {
  /** The value for `ANTHROPIC_BASE_URL`: `http://127.0.0.1:PORT`, no `/v1`. */
  url: string
  port: number
  /** Every request received, in arrival order, whatever its route. */
  requests: RecordedAnthropicRequest[]
  /** Only the `POST /v1/messages` requests. */
  readonly messageRequests: RecordedAnthropicRequest[]
  /** Answers for the next `POST /v1/messages`, consumed first in, first out. */
  enqueue(...answers: FakeMessagesAnswer[]): void
  /** Scripted answers not yet consumed. */
  readonly pending: number
  /** Resolves with the `count`-th `POST /v1/messages` (1-based) once it has arrived, e.g. to act while a turn is in flight. */
  messageRequest(count: number): Promise<RecordedAnthropicRequest>
  /** Stops listening and destroys open sockets (held-open streams included). */
  close(): Promise<void>
}

/**
 * Start the fake. A streaming request (`stream: true`) gets the full SSE sequence
 * (`message_start`, `ping`, per block `content_block_start` / `_delta`+ / `_stop`,
 * `message_delta` with the stop reason and usage, `message_stop`); the Claude Code
 * binary silently returns an empty result when `content_block_stop` is missing, which
 * `omitEvents` can reproduce. A non-streaming request gets the `message` JSON, since
 * clients fall back to it.
 */
export async function startFakeAnthropicMessages(script: FakeMessagesAnswer[] = []): Promise<FakeAnthropicMessages> {
  const { endpoint, scripted } = await startScriptedEndpoint(messagesApi, script)
  // Added to the handle itself, not spread into a copy, so `pending` stays a live getter.
  return Object.assign(endpoint, { messageRequests: scripted.list, messageRequest: scripted.nth })
}

const messagesApi: EndpointDescription<FakeMessagesResponse, RecordedAnthropicRequest> = {
  label: 'fake Anthropic server',
  basePath: '',
  served: 'POST /v1/messages and /v1/messages/count_tokens are served',
  record: (request, pathname) => ({ ...request, kind: kindOf(request.method, pathname) }),
  route: (request) => {
    switch (request.kind) {
      case 'messages':
        return { to: 'script' }
      case 'count_tokens':
        return { to: 'fixed', answer: (body) => ({ input_tokens: estimateTokens(promptText(body)) }) }
      case 'other':
        return { to: 'none' }
      default:
        return assertNever(request.kind, 'request kind')
    }
  },
  numbering: 'scripted requests',
  emptyQueue: { says: (number) => `no scripted response left for messages request #${number}` },
  errorBody,
  pacing: (answer) => ({ dropAfter: answer.cutMidEventAfter !== undefined ? answer.cutMidEventAfter + 1 : answer.dropAfterEvents, hangAfter: answer.hangAfterEvents, gapMs: answer.eventDelayMs }),
  streamHeaders: (turn) => ({ 'request-id': `req_fake_${turn.number}` }),
  frames: (answer, turn) => {
    const frames = answer.rawFrames ?? messageEvents(answer, contextOf(turn)).map(({ type, data }) => `event: ${type}\ndata: ${JSON.stringify(data)}\n\n`)
    const cut = answer.cutMidEventAfter
    // The event after the cut goes out half written (pacing drops the socket right after it).
    if (cut !== undefined && cut < frames.length) return [...frames.slice(0, cut), frames[cut]!.slice(0, Math.ceil(frames[cut]!.length / 2))]
    return frames
  },
  finished: (answer, turn) => messageBody(answer, contextOf(turn)),
}

/** Routes by pathname: the binary adds `?beta=true` to every call. */
function kindOf(method: string, pathname: string): RecordedAnthropicRequest['kind'] {
  if (method !== 'POST') return 'other'
  const route = pathname.replace(/\/+$/, '')
  if (route === '/v1/messages') return 'messages'
  if (route === '/v1/messages/count_tokens') return 'count_tokens'
  return 'other'
}

function contextOf({ body, number }: Turn<RecordedAnthropicRequest>): AnswerContext {
  return {
    requestNumber: number,
    model: typeof body.model === 'string' ? body.model : 'claude-fake',
    inputTokens: estimateTokens(promptText(body)),
  }
}
