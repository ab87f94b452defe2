/**
 * A fake OpenAI Responses API endpoint (`POST {base}/v1/responses`) that speaks the real
 * wire format, so a real client (the Codex app-server, through its `wire_api =
 * "responses"` provider) can be driven from a script.
 */
import { errorBody } from './openai-chat-wire.js'
import { finalResponse, streamEvents, type AnswerContext, type FakeResponsesAnswer } from './openai-responses-wire.js'
import { startScriptedEndpoint, type EndpointDescription, type RecordedRequest, type Turn } from './scripted-endpoint.js'

export interface FakeOpenAIResponses {
  /** Base URL for a client: `http://127.0.0.1:PORT/v1`. */
  url: string
  port: number
  /** Every request received, in arrival order (also ones that got errors). */
  requests: RecordedRequest[]
  /** Answers for the next responses requests, consumed first in, first out. */
  enqueue(...answers: FakeResponsesAnswer[]): void
  /** How many scripted answers are still waiting. */
  readonly pending: number
  close(): Promise<void>
}

/**
 * Starts the fake on 127.0.0.1. `POST` to a path ending in `/responses` consumes the next
 * scripted answer: SSE events when the body sets `stream: true`, else one JSON `response`
 * object. With no answer left it answers 500 saying so.
 */
export async function startFakeOpenAIResponses(script: FakeResponsesAnswer[] = []): Promise<FakeOpenAIResponses> {
  return (await startScriptedEndpoint(responsesApi, script)).endpoint
}

const responsesApi: EndpointDescription<FakeResponsesAnswer, RecordedRequest> = {
  label: 'fake OpenAI Responses server',
  basePath: '/v1',
  served: 'only POST /v1/responses is served',
  record: (request) => request,
  route: (request, pathname) => (request.method === 'POST' && pathname.endsWith('/responses') ? { to: 'script' } : { to: 'none' }),
  numbering: 'every request',
  emptyQueue: { says: (number) => `no scripted answer left for request #${number}`, type: 'fake_server_error' },
  errorBody,
  pacing: (answer) => ({ dropAfter: answer.dropAfterEvents, hangAfter: answer.hangAfterEvents, gapMs: answer.eventDelayMs }),
  frames: (answer, turn) => streamEvents(answer, contextOf(turn)).map((event) => `event: ${event.type}\ndata: ${JSON.stringify(event)}\n\n`),
  finished: (answer, turn) => finalResponse(answer, contextOf(turn)),
}

function contextOf({ body, number }: Turn<RecordedRequest>): AnswerContext {
  return {
    requestNumber: number,
    model: typeof body.model === 'string' ? body.model : 'fake-model',
    promptText: JSON.stringify([body.instructions ?? '', body.input ?? '']),
  }
}
