/**
 * Recording: every resolved adapter is wrapped, so whatever model a session uses
 * (DeepSeek, an OpenAI-compatible endpoint, the scripted one) streams through unchanged
 * while each call's request digest and response are appended to the session's file.
 * Lines are written synchronously as each call starts and ends, so a run that crashes
 * leaves every finished call on disk.
 */
import { appendFileSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { errorMessage, isAbortError, type PermissionDecision } from '@dsh/base'
import { LlmError, type LlmAdapter, type LlmChunk, type LlmRequest, type Message, type ToolSpec } from '@dsh/llm'
import { RECORDING_KIND, RECORDING_VERSION, recordingFileName, type RecordedApproval, type RecordedError, type RecordedRequest, type RecordedResponse, type RecordingHeader } from './format.js'
import type { Lineage, SessionFacts } from './lineage.js'
import type { SessionIdMask } from './session-ids.js'
import { maskEnvironmentFacts } from '@dsh/agent'

interface SessionFile {
  file: string
  calls: number
  approvals: number
  previous?: { system: string; tools: string; messages: string[] }
}

export class Recorder {
  private sessions = new Map<string, SessionFile>()

  /**
   * Records into `dir`. `fresh`: a new recording, so recordings of an earlier run there
   * are removed first (a child process adding its own sessions to its parent's recording
   * is not fresh).
   */
  constructor(
    readonly dir: string,
    fresh: boolean,
    private readonly lineage: Lineage,
    private readonly facts: (sessionId: string) => SessionFacts | undefined,
    private readonly ids: SessionIdMask,
  ) {
    mkdirSync(dir, { recursive: true })
    if (fresh) {
      for (const name of readdirSync(dir)) {
        if (name.endsWith('.jsonl') && isRecordingFile(join(dir, name))) rmSync(join(dir, name))
      }
    }
  }

  /** Stream `request` through `adapter`, recording the call in its session's file. */
  async *record(adapter: LlmAdapter, request: LlmRequest): AsyncGenerator<LlmChunk, void, undefined> {
    const session = this.sessionFile(request.origin.sessionId)
    const call = session.calls++
    const { system, tools, messages } = this.ids.mask({ system: maskEnvironmentFacts(request.system), tools: request.tools, messages: request.messages.toArray() })
    appendFileSync(session.file, `${JSON.stringify({ call, request: this.digest(session, request.model, system, tools, messages) })}\n`)
    const chunks: LlmChunk[] = []
    let response: RecordedResponse | undefined
    try {
      for await (const streamed of adapter.stream(request)) {
        // Usage names the model that answered, so a replay logs the same usage as the run it
        // replays (its own spec, `replay:DIR`, is not the model whose tokens they were).
        const chunk: LlmChunk = streamed.type === 'usage' && streamed.usage.model === undefined ? { ...streamed, usage: { ...streamed.usage, model: `${adapter.name}:${request.model}` } } : streamed
        chunks.push(chunk)
        yield chunk
      }
      response = { chunks, end: 'finish' }
    } catch (error) {
      response = isAbortError(error) || request.signal.aborted ? { chunks, end: 'aborted' } : { chunks, end: 'error', error: recordedError(error) }
      throw error
    } finally {
      // A consumer that stopped reading early abandoned the call: replay ends it the same way.
      appendFileSync(session.file, `${JSON.stringify({ call, response: this.ids.mask(response ?? { chunks, end: 'aborted' }) })}\n`)
    }
  }

  /** Append a decision of the session's broker (see `RecordedApproval`). */
  recordApproval(sessionId: string, tool: string, subject: string, decision: PermissionDecision): void {
    const session = this.sessionFile(sessionId)
    const line: RecordedApproval = { approval: session.approvals++, request: this.ids.mask({ tool, subject }), decision: this.ids.mask(decision) }
    appendFileSync(session.file, `${JSON.stringify(line)}\n`)
  }

  private sessionFile(sessionId: string): SessionFile {
    let session = this.sessions.get(sessionId)
    if (!session) {
      const key = this.lineage.keyOf(sessionId)
      const facts = this.facts(sessionId)
      const header: RecordingHeader = { recording: RECORDING_KIND, version: RECORDING_VERSION, session: key, prompt: this.ids.mask(facts?.ownPrompt ?? '') }
      // The parent's key is this key's prefix (also for a parent in another process).
      const lastDot = key.lastIndexOf('.')
      if (lastDot > 0) header.parent = key.slice(0, lastDot)
      if (facts?.header.toolCallId !== undefined) header.toolCallId = facts.header.toolCallId
      const file = join(this.dir, recordingFileName(key))
      writeFileSync(file, `${JSON.stringify(header)}\n`, { mode: 0o644 })
      session = { file, calls: 0, approvals: 0 }
      this.sessions.set(sessionId, session)
    }
    return session
  }

  private digest(session: SessionFile, model: string, system: string, toolSpecs: readonly ToolSpec[], messages: Message[]): RecordedRequest {
    const tools = JSON.stringify(toolSpecs)
    const encoded = messages.map((message) => JSON.stringify(message))
    const previous = session.previous
    let keep = 0
    if (previous) while (keep < previous.messages.length && keep < encoded.length && previous.messages[keep] === encoded[keep]) keep++
    const digest: RecordedRequest = { model, messages: { keep, add: encoded.slice(keep).map((text) => JSON.parse(text) as Message) } }
    if (!previous || previous.system !== system) digest.system = system
    if (!previous || previous.tools !== tools) digest.tools = JSON.parse(tools) as ToolSpec[]
    session.previous = { system, tools, messages: encoded }
    // Key order for readable lines: model, system, tools, messages.
    return { model: digest.model, ...(digest.system !== undefined && { system: digest.system }), ...(digest.tools && { tools: digest.tools }), messages: digest.messages }
  }
}

function recordedError(error: unknown): RecordedError {
  const recorded: RecordedError = { name: error instanceof Error ? error.name : 'Error', message: errorMessage(error) }
  if (error instanceof LlmError) {
    recorded.code = error.code
    if (error.status !== undefined) recorded.status = error.status
  }
  return recorded
}

function isRecordingFile(file: string): boolean {
  try {
    const first = readFileSync(file, 'utf8').split('\n', 1)[0]
    return first.includes(`"recording":"${RECORDING_KIND}"`)
  } catch {
    // Unreadable: not ours to remove.
    return false
  }
}
