import { isRecord } from './json.js'
import { completionBody, errorBody, streamChunks, type AnswerContext, type FakeChatResponse } from './openai-chat-wire.js'
import { startScriptedEndpoint, type EndpointDescription, type RecordedRequest, type Turn } from './scripted-endpoint.js'

export interface FakeOpenAIChat {
  /** Base URL for an OpenAI client: `http://127.0.0.1:PORT/v1`. */
  url: string
  port: number
  /** Every request received, in arrival order (also ones that got errors). */
  requests: RecordedRequest[]
  /** Answers for the next chat-completions requests, consumed first in, first out. */
  enqueue(...responses: FakeChatResponse[]): void
  /** How many scripted answers are still waiting. */
  readonly pending: number
  close(): Promise<void>
}

/**
 * A fake OpenAI chat-completions endpoint on 127.0.0.1 that speaks the real wire format:
 * `POST /v1/chat/completions` answers with SSE `chat.completion.chunk`s and `[DONE]` when
 * the body sets `stream: true`, else with a `chat.completion`. Each request consumes the
 * next scripted answer; with none left it answers 500 saying so.
 */
export async function startFakeOpenAIChat(script: FakeChatResponse[] = []): Promise<FakeOpenAIChat> {
  return (await startScriptedEndpoint(chatCompletions, script)).endpoint
}

const chatCompletions: EndpointDescription<FakeChatResponse, RecordedRequest> = {
  label: 'fake OpenAI chat server',
  basePath: '/v1',
  served: 'only POST /v1/chat/completions is served',
  record: (request) => request,
  route: (request, pathname) => (request.method === 'POST' && pathname.endsWith('/chat/completions') ? { to: 'script' } : { to: 'none' }),
  numbering: 'every request',
  emptyQueue: { says: (number) => `no scripted response left for request #${number}`, type: 'fake_server_error' },
  errorBody,
  pacing: (answer) => ({ dropAfter: answer.dropAfterChunks, hangAfter: answer.hangAfterChunks, gapMs: answer.chunkDelayMs }),
  frames: (answer, turn) => {
    const chunks = streamChunks(answer, contextOf(turn), includesUsage(turn.body)).map((chunk) => JSON.stringify(chunk))
    return [...chunks, '[DONE]'].map((data) => `data: ${data}\n\n`)
  },
  finished: (answer, turn) => completionBody(answer, contextOf(turn)),
}

function contextOf({ body, number }: Turn<RecordedRequest>): AnswerContext {
  return {
    requestNumber: number,
    model: typeof body.model === 'string' ? body.model : 'fake-model',
    promptText: JSON.stringify(body.messages ?? ''),
  }
}

function includesUsage(body: Record<string, unknown>): boolean {
  const options = body.stream_options
  return isRecord(options) && options.include_usage === true
}
