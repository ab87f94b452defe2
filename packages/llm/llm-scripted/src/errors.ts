import { LlmError } from '@dsh/llm'

export type ScriptErrorCode =
  /** The script file is missing or unreadable. */
  | 'UNREADABLE_SCRIPT'
  /** The script parsed but breaks the format (the message names the element). */
  | 'INVALID_SCRIPT'
  /** A session's first request matched no rule. */
  | 'NO_RULE'
  /** A session asked for more replies than its rule has. */
  | 'OUT_OF_REPLIES'

/**
 * A failure of the scripted model itself. It is an `LlmError` because, to the agent loop,
 * a missing or exhausted script is the scripted provider failing, just as a bad API key
 * is for a real one: it must surface as a model error, not crash the loop.
 */
export class ScriptError extends LlmError {
  override name = 'ScriptError'
  constructor(readonly code: ScriptErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, undefined, options)
  }
}
