/**
 * What a test of a model adapter asks of it: a request with defaults, and the stream's
 * chunks or what it threw. Every adapter's tests (OpenAI, Anthropic) share these.
 */
import { historyOf, userText, type LlmChunk, type LlmRequest, type Message, type ToolSpec } from '@dsh/llm'

export interface RequestParts {
  model?: string
  system?: string
  messages?: Message[]
  tools?: ToolSpec[]
  signal?: AbortSignal
}

/** A request from session `s1`: `model` (else `defaultModel`), no system prompt, the user saying "hi", no tools. */
export function requestOf(parts: RequestParts = {}, defaultModel = 'test-model'): LlmRequest {
  return {
    model: parts.model ?? defaultModel,
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

/** The chunks of one type, typed as such. */
export const ofType = <T extends LlmChunk['type']>(chunks: LlmChunk[], type: T) =>
  chunks.filter((chunk): chunk is Extract<LlmChunk, { type: T }> => chunk.type === type)
