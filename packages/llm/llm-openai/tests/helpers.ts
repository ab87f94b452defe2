import { historyOf, userText, type LlmChunk, type LlmRequest, type Message, type ToolSpec } from '@dsh/llm'
import { startFakeOpenAIChat, type FakeChatResponse, type FakeOpenAIChat } from '@dsh/testkit'
import { afterEach } from 'vitest'
import { OpenAIChatAdapter, type OpenAIChatAdapterOptions } from '../src/index.js'

export interface RequestParts {
  model?: string
  system?: string
  messages?: Message[]
  tools?: ToolSpec[]
  signal?: AbortSignal
}

export function requestOf(parts: RequestParts = {}): LlmRequest {
  return {
    model: parts.model ?? 'test-model',
    system: parts.system ?? '',
    messages: historyOf(parts.messages ?? [userText('hi')]),
    tools: parts.tools ?? [],
    signal: parts.signal ?? new AbortController().signal,
    origin: { sessionId: 's1' },
  }
}

export async function collect(stream: AsyncIterable<LlmChunk>): Promise<LlmChunk[]> {
  const chunks: LlmChunk[] = []
  for await (const chunk of stream) chunks.push(chunk)
  return chunks
}

/** Runs a stream to its end and returns what it threw (failing if it did not throw). */
export async function failureOf(stream: AsyncIterable<LlmChunk>): Promise<Error & { status?: number; code?: string }> {
  try {
    await collect(stream)
  } catch (error) {
    if (error instanceof Error) return error
    throw new Error(`stream threw a non-Error: ${String(error)}`)
  }
  throw new Error('expected the stream to fail, but it completed')
}

const servers: FakeOpenAIChat[] = []
afterEach(async () => {
  await Promise.all(servers.splice(0).map((server) => server.close()))
})

/** A fake server (closed after the test) and an adapter pointed at it. */
export async function fakeEndpoint(script: FakeChatResponse[] = [], options: OpenAIChatAdapterOptions = {}) {
  const server = await startFakeOpenAIChat(script)
  servers.push(server)
  // No retries unless a test asks: most tests are about how one failure is reported.
  const adapter = new OpenAIChatAdapter({ name: 'fake', baseURL: server.url, apiKey: 'sk-test', maxRetries: 0, ...options })
  return { server, adapter }
}
