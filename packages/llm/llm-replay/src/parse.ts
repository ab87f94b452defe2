/**
 * Reading a recording file back, checking every line: a truncated file, a hand edit that
 * breaks the shape, or a file from another format version is a `RecordingError` naming
 * the file and the line, never a partial replay.
 */
import { FINISH_REASONS, isRecord, PERMISSION_DECISIONS, type PermissionDecision } from '@dsh/base'
import type { LlmChunk, LlmErrorCode, Message, ToolSpec } from '@dsh/llm'
import { RecordingError } from './errors.js'
import { RECORDING_KIND, RECORDING_VERSION, type FullRequest, type RecordedApproval, type RecordedCall, type RecordedError, type RecordedResponse, type Recording, type RecordingHeader } from './format.js'

/** Every `LlmErrorCode`, so a recorded code is checked against the closed union. */
const LLM_ERROR_CODES: Record<LlmErrorCode, true> = {
  NO_API_KEY: true,
  AUTH: true,
  RATE_LIMITED: true,
  HTTP_CLIENT: true,
  HTTP_SERVER: true,
  UNREACHABLE: true,
  TIMEOUT: true,
  STALLED: true,
  CONNECTION_LOST: true,
  BAD_RESPONSE: true,
  INCOMPLETE_RESPONSE: true,
  UNREADABLE_SCRIPT: true,
  INVALID_SCRIPT: true,
  NO_RULE: true,
  OUT_OF_REPLIES: true,
  SIMULATED: true,
  INVALID_RECORDING: true,
  NO_RECORDING: true,
  REPLAY_DIVERGED: true,
}

const FINISH_REASON_SET = new Set<string>(FINISH_REASONS)

export function parseRecording(file: string, text: string): Recording {
  const fail = (line: number, detail: string) =>
    new RecordingError('INVALID_RECORDING', `${file}:${line}: ${detail}; record the run again (dsh run --record DIR ...) or restore the file`)
  const lines = text.split('\n')
  if (lines.at(-1) === '') lines.pop()
  else if (lines.length > 0) throw fail(lines.length, 'the last line does not end with a newline (the file is truncated)')
  if (lines.length === 0) throw fail(1, 'the file is empty')
  const values = lines.map((line, index) => {
    try {
      return JSON.parse(line) as unknown
    } catch {
      throw fail(index + 1, 'not valid JSON (a truncated or hand-edited line)')
    }
  })
  const header = headerOf(values[0], (detail) => fail(1, detail))
  // Approvals fall between calls wherever they were decided; the calls are the other lines, in pairs.
  const approvals: Recording['approvals'] = []
  const rest: Array<{ value: unknown; lineNo: number }> = []
  values.slice(1).forEach((value, index) => {
    const lineNo = index + 2
    if (isRecord(value) && value.approval !== undefined) approvals.push(approvalOf(value, approvals.length, (detail) => fail(lineNo, detail), lineNo))
    else rest.push({ value, lineNo })
  })
  const calls: RecordedCall[] = []
  let state: FullRequest = { model: '', system: '', tools: [], messages: [] }
  for (let index = 0; index < rest.length; index += 2) {
    const { value: requestLine, lineNo } = rest[index]!
    const call = calls.length
    if (!isRecord(requestLine) || requestLine.call !== call || !isRecord(requestLine.request)) {
      throw fail(lineNo, `expected the request of call ${call} ({"call":${call},"request":{…}})`)
    }
    state = applyRequest(state, requestLine.request, (detail) => fail(lineNo, `call ${call}: ${detail}`))
    if (index + 1 >= rest.length) throw fail(lineNo, `call ${call} has a request but no response (the file is truncated)`)
    const { value: responseLine, lineNo: responseNo } = rest[index + 1]!
    if (!isRecord(responseLine) || responseLine.call !== call || !isRecord(responseLine.response)) {
      throw fail(responseNo, `expected the response of call ${call} ({"call":${call},"response":{…}})`)
    }
    const response = responseOf(responseLine.response, (detail) => fail(responseNo, `call ${call}: ${detail}`))
    calls.push({ index: call, request: state, response, line: lineNo })
  }
  return { file, header, calls, approvals }
}

function approvalOf(raw: Record<string, unknown>, expected: number, fail: (detail: string) => Error, line: number): RecordedApproval & { line: number } {
  if (raw.approval !== expected) throw fail(`expected approval ${expected} ({"approval":${expected},…})`)
  const { request, decision } = raw
  if (!isRecord(request) || typeof request.tool !== 'string' || typeof request.subject !== 'string') throw fail(`approval ${expected}: request must be {tool, subject}`)
  if (!isRecord(decision) || !(PERMISSION_DECISIONS as readonly unknown[]).includes(decision.decision) || typeof decision.by !== 'string' || (decision.decision === 'reject' && typeof decision.reason !== 'string')) {
    throw fail(`approval ${expected}: decision must be {decision: ${PERMISSION_DECISIONS.join(' | ')}, by, reason (of a rejection)}`)
  }
  return { approval: expected, request: { tool: request.tool, subject: request.subject }, decision: decision as unknown as PermissionDecision, line }
}

function headerOf(value: unknown, fail: (detail: string) => Error): RecordingHeader {
  if (!isRecord(value) || value.recording !== RECORDING_KIND) throw fail(`not a dsh recording (line 1 must be {"recording":"${RECORDING_KIND}",…})`)
  if (value.version !== RECORDING_VERSION) throw fail(`recording format version ${JSON.stringify(value.version)} is not supported; this dsh reads version ${RECORDING_VERSION}`)
  if (typeof value.session !== 'string' || value.session === '') throw fail('"session" must be the lineage key')
  if (typeof value.prompt !== 'string') throw fail('"prompt" must be a string')
  for (const key of ['parent', 'toolCallId'] as const) {
    if (value[key] !== undefined && typeof value[key] !== 'string') throw fail(`"${key}" must be a string when present`)
  }
  return value as unknown as RecordingHeader
}

function applyRequest(previous: FullRequest, raw: Record<string, unknown>, fail: (detail: string) => Error): FullRequest {
  if (typeof raw.model !== 'string') throw fail('request.model must be a string')
  if (raw.system !== undefined && typeof raw.system !== 'string') throw fail('request.system must be a string when present')
  if (raw.tools !== undefined && !(Array.isArray(raw.tools) && raw.tools.every(isToolSpec))) throw fail('request.tools must be a list of {name, description, parameters} when present')
  const messages = raw.messages
  if (!isRecord(messages) || !Number.isSafeInteger(messages.keep) || (messages.keep as number) < 0 || !Array.isArray(messages.add)) {
    throw fail('request.messages must be {"keep": N, "add": [...]}')
  }
  const keep = messages.keep as number
  if (keep > previous.messages.length) throw fail(`request.messages.keep is ${keep}, but the previous call had ${previous.messages.length} messages`)
  const added = messages.add as unknown[]
  added.forEach((message, index) => {
    if (!isMessage(message)) throw fail(`request.messages.add[${index}] is not a message ({role, content: [...]})`)
  })
  return {
    model: raw.model,
    system: (raw.system as string | undefined) ?? previous.system,
    tools: (raw.tools as ToolSpec[] | undefined) ?? previous.tools,
    messages: [...previous.messages.slice(0, keep), ...(added as Message[])],
  }
}

function responseOf(raw: Record<string, unknown>, fail: (detail: string) => Error): RecordedResponse {
  if (!Array.isArray(raw.chunks)) throw fail('response.chunks must be a list')
  raw.chunks.forEach((chunk, index) => {
    const problem = chunkProblem(chunk)
    if (problem) throw fail(`response.chunks[${index}]: ${problem}`)
  })
  if (raw.end !== 'finish' && raw.end !== 'error' && raw.end !== 'aborted') throw fail('response.end must be "finish", "error" or "aborted"')
  const response: RecordedResponse = { chunks: raw.chunks as LlmChunk[], end: raw.end }
  if (raw.end === 'error') response.error = errorOf(raw.error, fail)
  return response
}

function errorOf(raw: unknown, fail: (detail: string) => Error): RecordedError {
  if (!isRecord(raw) || typeof raw.message !== 'string' || typeof raw.name !== 'string') throw fail('response.error must be {name, message, code?, status?}')
  if (raw.code !== undefined && !(typeof raw.code === 'string' && raw.code in LLM_ERROR_CODES)) throw fail(`response.error.code ${JSON.stringify(raw.code)} is not an LlmError code`)
  if (raw.status !== undefined && !Number.isSafeInteger(raw.status)) throw fail('response.error.status must be an integer when present')
  return raw as unknown as RecordedError
}

function chunkProblem(chunk: unknown): string | undefined {
  if (!isRecord(chunk)) return 'not an object'
  switch (chunk.type) {
    case 'text-delta':
    case 'reasoning-delta':
      return typeof chunk.text === 'string' ? undefined : 'text must be a string'
    case 'tool-call':
      return isRecord(chunk.call) && chunk.call.type === 'tool-call' && typeof chunk.call.id === 'string' && typeof chunk.call.name === 'string' ? undefined : 'call must be {type: "tool-call", id, name, args}'
    case 'usage':
      return isRecord(chunk.usage) && Number.isFinite(chunk.usage.inputTokens) && Number.isFinite(chunk.usage.outputTokens) ? undefined : 'usage must be {inputTokens, outputTokens}'
    case 'finish':
      return typeof chunk.reason === 'string' && FINISH_REASON_SET.has(chunk.reason) ? undefined : `reason must be one of ${FINISH_REASONS.join(', ')}`
    default:
      return `unknown chunk type ${JSON.stringify(chunk.type)}`
  }
}

function isToolSpec(value: unknown): value is ToolSpec {
  return isRecord(value) && typeof value.name === 'string' && typeof value.description === 'string' && isRecord(value.parameters)
}

function isMessage(value: unknown): value is Message {
  return isRecord(value) && (value.role === 'user' || value.role === 'assistant' || value.role === 'tool') && Array.isArray(value.content) && value.content.every(isRecord)
}
