import { LlmError, type LlmErrorCode } from '@dsh/llm'

/** The scripted model's own failures, a part of `LlmErrorCode` (each is documented there). */
export type ScriptErrorCode = Extract<LlmErrorCode, 'UNREADABLE_SCRIPT' | 'INVALID_SCRIPT' | 'NO_RULE' | 'OUT_OF_REPLIES'>

/**
 * A failure of the scripted model itself. It is an `LlmError` because, to the agent loop,
 * a missing or exhausted script is the scripted provider failing, just as a bad API key
 * is for a real one: it must surface as a model error, not crash the loop.
 */
export class ScriptError extends LlmError<ScriptErrorCode> {}
