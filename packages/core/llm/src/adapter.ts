import type { MessageHistory } from './history.js'
import type { LlmChunk } from './stream.js'

/** A tool as the model sees it: name, description and a JSON Schema for its arguments. */
export interface ToolSpec {
  name: string
  description: string
  parameters: Record<string, unknown>
}

/**
 * Which session makes a request. Real adapters ignore it; an adapter that needs more
 * about the session (the scripted one picks replies by its prompt and depth) looks the
 * session up by this id.
 */
export interface RequestOrigin {
  sessionId: string
}

export interface LlmRequest {
  /** Model name within the adapter (the part after `adapter:` in a model spec). */
  model: string
  system: string
  /** The history, derived from the session log: a read-only view that may share a forked parent's prefix. */
  messages: MessageHistory
  tools: readonly ToolSpec[]
  signal: AbortSignal
  origin: RequestOrigin
}

export interface LlmAdapter {
  /** Registry name, also the prefix of model specs (`openai:gpt-x`, `scripted:./demo.yml`). */
  readonly name: string
  /** Model used when a spec names only the adapter. */
  readonly defaultModel?: string
  /**
   * Stream one response. Provider failures are thrown from the iterator as `LlmError`;
   * an aborted signal ends it with an `AbortError`-named error.
   */
  stream(request: LlmRequest): AsyncIterable<LlmChunk>
  /**
   * Optional: check that `model` can be used at all (a script file that exists and
   * parses, a recording directory), so a host refuses a bad model spec before any
   * session is created. Rejects with an `LlmError` saying what to fix.
   */
  prepare?(model: string): Promise<void>
}

export { isAbortError } from '@dsh/base'
