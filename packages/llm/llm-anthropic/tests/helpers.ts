import { historyOf, userText, type LlmChunk, type LlmRequest, type Message, type ToolSpec } from '@dsh/llm'
import { startFakeAnthropicMessages, type FakeAnthropicMessages, type FakeMessagesAnswer } from '@dsh/testkit'
import { afterEach } from 'vitest'
import { AnthropicAdapter, type AnthropicAdapterOptions } from '../src/index.js'

export interface RequestParts {
  model?: string
  system?: string
  messages?: Message[]
  tools?: ToolSpec[]
  signal?: AbortSignal
}

export function requestOf(parts: RequestParts = {}): LlmRequest {
  return {
    model: parts.model ?? 'claude-x',
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

export const ofType = <T extends LlmChunk['type']>(chunks: LlmChunk[], type: T) =>
  chunks.filter((chunk): chunk is Extract<LlmChunk, { type: T }> => chunk.type === type)

const servers: FakeAnthropicMessages[] = []
afterEach(async () => {
  await Promise.all(servers.splice(0).map((server) => server.close()))
})

export async function fakeServer(script: FakeMessagesAnswer[] = []): Promise<FakeAnthropicMessages> {
  const server = await startFakeAnthropicMessages(script)
  servers.push(server)
  return server
}

/** A fake Messages server (closed after the test) and an adapter pointed at it. */
export async function fakeEndpoint(script: FakeMessagesAnswer[] = [], options: AnthropicAdapterOptions = {}) {
  const server = await fakeServer(script)
  // No retries unless a test asks: most tests are about how one failure is reported.
  const adapter = new AnthropicAdapter({ name: 'fake', baseURL: server.url, apiKey: 'sk-ant-test', maxRetries: 0, ...options })
  return { server, adapter }
}

/** The JSON body of the `n`-th (1-based) messages request the server got. */
export function bodyOf(server: FakeAnthropicMessages, n: number): Record<string, unknown> {
  return server.messageRequests[n - 1]!.body as Record<string, unknown>
}
