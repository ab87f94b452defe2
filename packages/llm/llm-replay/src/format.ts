/**
 * The recording format: one JSONL file per session, named by the session's lineage
 * (`root.jsonl`, `root.call_1.jsonl`, …). Line 1 describes the session; then each model
 * call is two lines, the request digest and the streamed response. A request stores the
 * system prompt and tools only when they changed since the previous call, and its
 * messages as "keep the first N of the previous call's, then add these", so a file stays
 * small and a pull request diff shows what changed. See the package README.
 */
import type { PermissionDecision } from '@dsh/base'
import type { LlmChunk, LlmErrorCode, Message, ToolSpec } from '@dsh/llm'

export const RECORDING_KIND = 'dsh-llm-recording'
export const RECORDING_VERSION = 1

export interface RecordingHeader {
  recording: typeof RECORDING_KIND
  version: typeof RECORDING_VERSION
  /** The session's lineage key, also the file name without `.jsonl`. */
  session: string
  /** The parent's lineage key; absent for a root. */
  parent?: string
  /** The parent's tool call that started the session, when a tool did. */
  toolCallId?: string
  /** The session's own first prompt, as it was when it first called the model. */
  prompt: string
}

export interface RecordedRequest {
  model: string
  /** Absent: the same as the previous call's. */
  system?: string
  /** Absent: the same as the previous call's. */
  tools?: ToolSpec[]
  messages: { keep: number; add: Message[] }
}

export interface RecordedError {
  /** The `LlmError` code, when the adapter raised one. */
  code?: LlmErrorCode
  name: string
  message: string
  status?: number
}

export interface RecordedResponse {
  chunks: LlmChunk[]
  /** `finish`: the stream ended normally; `error`: it threw `error`; `aborted`: it was cancelled or abandoned. */
  end: 'finish' | 'error' | 'aborted'
  error?: RecordedError
}

/**
 * A side effect the session's broker decided without a rule (a user's answer, the default,
 * an earlier "always", a timeout): a replay answers the same request with the same
 * decision instead of asking anyone. Numbered in the session's order; a line of its own
 * wherever it fell between the calls.
 */
export interface RecordedApproval {
  approval: number
  request: { tool: string; subject: string }
  decision: PermissionDecision
}

export type RecordingLine =
  | RecordingHeader
  | { call: number; request: RecordedRequest }
  | { call: number; response: RecordedResponse }
  | RecordedApproval

/** The request a call made, in full (the digest's deltas applied). */
export interface FullRequest {
  model: string
  system: string
  tools: ToolSpec[]
  messages: Message[]
}

export interface RecordedCall {
  index: number
  request: FullRequest
  response: RecordedResponse
  /** 1-based line of the call's request, for messages. */
  line: number
}

export interface Recording {
  file: string
  header: RecordingHeader
  calls: RecordedCall[]
  /** With the line each was read from. */
  approvals: Array<RecordedApproval & { line: number }>
}

/** A lineage key as a file name: letters, digits, `_`, `-`; `.` separates generations. */
export function recordingFileName(key: string): string {
  return `${key}.jsonl`
}

/** One lineage segment (a tool call id from a provider) made safe for a file name. */
export function lineageSegment(raw: string): string {
  const safe = raw.replace(/[^A-Za-z0-9_-]/g, '_')
  return safe.length > 0 ? safe.slice(0, 80) : '_'
}
