/**
 * Replay: each live session is bound, at its first request, to the recording its lineage
 * names, then plays that recording's calls in order. Every request is compared with the
 * recorded one (system prompt, tools, messages) before the recorded response is streamed;
 * the first difference fails the call loudly. What went wrong is also kept, so the host
 * can report it after the run together with the calls and recordings left unused.
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs'
import { join, resolve } from 'node:path'
import { errorMessage, type PermissionDecision } from '@dsh/base'
import { LlmError, type LlmAdapter, type LlmChunk, type LlmRequest } from '@dsh/llm'
import { firstDifference } from './diff.js'
import { RecordingError } from './errors.js'
import { recordingFileName, type RecordedCall, type RecordedResponse, type Recording } from './format.js'
import type { Lineage, SessionFacts } from './lineage.js'
import type { SessionIdMask } from './session-ids.js'
import { parseRecording } from './parse.js'
import { maskEnvironmentFacts } from '@dsh/agent'

interface Binding {
  key: string
  recording: Recording
  next: number
  /** Recorded approvals already answered. */
  usedApprovals: Set<number>
}

/** One recording directory being replayed. */
export class Replay {
  readonly dir: string
  private recordings = new Map<string, Recording>()
  private bindings = new Map<string, Binding>()
  private boundKeys = new Map<string, string>()
  private failures: string[] = []
  /** Lineages handed to child processes: their recordings are theirs to use. */
  private delegated = new Set<string>()
  /** Set in a child process: only recordings under these lineages are this process's. */
  private scope: Set<string> | undefined
  /** Aborted at the first failure: calls waiting to be cancelled as recorded stop waiting. */
  private failed = new AbortController()

  constructor(
    dir: string,
    private readonly lineage: Lineage,
    private readonly facts: (sessionId: string) => SessionFacts | undefined,
    private readonly ids: SessionIdMask,
  ) {
    this.dir = resolve(dir)
    if (!existsSync(this.dir) || !statSync(this.dir).isDirectory()) {
      throw new RecordingError('INVALID_RECORDING', `replay: ${this.dir} is not a directory of recordings; record one with dsh run --record ${dir} ...`)
    }
    // Every file is read and checked now: a broken one fails before any session starts.
    for (const name of readdirSync(this.dir).filter((entry) => entry.endsWith('.jsonl')).sort()) {
      const file = join(this.dir, name)
      const recording = parseRecording(file, readFileSync(file, 'utf8'))
      if (recordingFileName(recording.header.session) !== name) {
        throw new RecordingError('INVALID_RECORDING', `${file}:1: the recording is of session "${recording.header.session}" but the file is named ${name}; rename it back or record again`)
      }
      this.recordings.set(recording.header.session, recording)
    }
    if (this.recordings.size === 0) throw new RecordingError('INVALID_RECORDING', `replay: ${this.dir} holds no recordings (*.jsonl); record one with dsh run --record ${dir} ...`)
  }

  async *stream(request: LlmRequest): AsyncGenerator<LlmChunk, void, undefined> {
    const call = this.nextCall(request)
    // A cancelled call of a child waits for its parent to cancel it as recorded; one of a
    // root (cancelled by a user, who does not take part in a replay) ends cancelled now.
    const header = this.facts(request.origin.sessionId)?.header
    const child = header?.parentSession !== undefined && this.facts(header.parentSession) !== undefined
    yield* playResponse(this.ids.unmask(call.response), request.signal, child ? this.failed.signal : undefined)
  }

  /**
   * The recorded decision of the session's request to run `tool` on `subject`: the first
   * one not answered yet with the same tool and the same whole subject (requests of
   * children running at once may come in another order than recorded). The subject is
   * compared whole and exactly, never by tool alone or by a prefix: the broker gives a
   * long one cut and ending with the SHA-256 of all of it, so two commands alike for
   * their first 256 KiB differ here too. A request the recording never decided is a
   * divergence: it is rejected, so nothing runs that the recorded run did not allow.
   */
  approval(sessionId: string, tool: string, subject: string): PermissionDecision {
    try {
      const binding = this.bind(sessionId)
      const masked = this.ids.mask({ tool, subject })
      const undecided = binding.recording.approvals.filter((entry) => !binding.usedApprovals.has(entry.approval) && entry.request.tool === masked.tool)
      const found = undecided.find((entry) => entry.request.subject === masked.subject)
      if (!found) {
        throw new RecordingError('REPLAY_DIVERGED', `replay diverged: session ${binding.key} asked to run ${tool} ${JSON.stringify(subject.slice(0, 120))}, which its recording never decided; ${nearestDecision(tool, masked.subject, undecided[0], binding.recording.file)}`)
      }
      binding.usedApprovals.add(found.approval)
      return this.ids.unmask(found.decision)
    } catch (error) {
      this.failures.push(errorMessage(error))
      this.failed.abort()
      return { decision: 'reject', by: 'the replay', reason: errorMessage(error) }
    }
  }

  /** `lineage` (and everything below it) is replayed by another process. */
  delegate(lineage: string): void {
    this.delegated.add(lineage)
  }

  /** This process replays only `lineage` and what is below it (an adopted ACP session). */
  scopeTo(lineage: string): void {
    ;(this.scope ??= new Set()).add(lineage)
  }

  /**
   * Problems the run left: each failure in the order it happened, then every bound
   * recording with calls never made and every recording no session used.
   */
  problems(): string[] {
    const problems = [...this.failures]
    for (const binding of this.bindings.values()) {
      const left = binding.recording.calls.length - binding.next
      if (left > 0) problems.push(`replay: session ${binding.key} made ${binding.next} of its ${binding.recording.calls.length} recorded calls; the next was never made (${binding.recording.file}:${binding.recording.calls[binding.next].line})`)
    }
    const under = (key: string, lineages: Iterable<string>) => [...lineages].some((lineage) => key === lineage || key.startsWith(`${lineage}.`))
    for (const [key, recording] of this.recordings) {
      if (under(key, this.delegated) || (this.scope && !under(key, this.scope))) continue
      if (!this.boundKeys.has(key)) problems.push(`replay: no live session had the lineage of recording ${key} (${recording.file}:1); the run started fewer sessions than were recorded`)
    }
    return problems
  }

  private nextCall(request: LlmRequest): RecordedCall {
    try {
      const binding = this.bind(request.origin.sessionId)
      const { recording } = binding
      const call = recording.calls[binding.next]
      if (!call) {
        throw new RecordingError('REPLAY_DIVERGED', `replay diverged: session ${binding.key} made call ${binding.next}, but its recording holds only ${recording.calls.length} calls (${recording.file})`)
      }
      binding.next++
      const live = this.ids.mask({ system: maskEnvironmentFacts(request.system), tools: request.tools, messages: request.messages.toArray() })
      const expected = { system: call.request.system, tools: call.request.tools, messages: call.request.messages }
      // Through JSON, as the recording went: absent optional fields compare equal.
      const difference = firstDifference(expected, JSON.parse(JSON.stringify(live)) as unknown)
      if (difference) {
        throw new RecordingError(
          'REPLAY_DIVERGED',
          `replay diverged: session ${binding.key}, call ${call.index}: ${difference.path} differs: recorded ${difference.recorded}, live ${difference.live} (${recording.file}:${call.line})`,
        )
      }
      return call
    } catch (error) {
      this.failures.push(errorMessage(error))
      this.failed.abort()
      throw error
    }
  }

  private bind(sessionId: string): Binding {
    const bound = this.bindings.get(sessionId)
    if (bound) return bound
    const key = this.lineage.keyOf(sessionId)
    const recording = this.recordings.get(key)
    const file = join(this.dir, recordingFileName(key))
    if (!recording) {
      throw new RecordingError('NO_RECORDING', `replay: live session ${sessionId} has lineage ${key}, but there is no recording ${file}; the run started a session the recording does not have (record the run again if that is intended)`)
    }
    const other = this.boundKeys.get(key)
    if (other !== undefined) throw new RecordingError('NO_RECORDING', `replay: live sessions ${other} and ${sessionId} both have lineage ${key} (${file}); one recording cannot answer two sessions`)
    const prompt = this.ids.mask(this.facts(sessionId)?.ownPrompt ?? '')
    if (prompt !== recording.header.prompt) {
      const difference = firstDifference(recording.header.prompt, prompt)!
      throw new RecordingError('REPLAY_DIVERGED', `replay diverged: session ${key}, call 0: prompt differs: recorded ${difference.recorded}, live ${difference.live} (${file}:1)`)
    }
    const binding: Binding = { key, recording, next: 0, usedApprovals: new Set() }
    this.bindings.set(sessionId, binding)
    this.boundKeys.set(key, sessionId)
    return binding
  }
}

/** Where a request the recording never decided parts from the recording's next undecided one of the same tool, if any. */
function nearestDecision(tool: string, live: string, next: Recording['approvals'][number] | undefined, file: string): string {
  if (next === undefined) return `it holds no undecided ${tool} request (${file})`
  const difference = firstDifference(next.request.subject, live)!
  return `its next undecided ${tool} request differs: recorded ${difference.recorded}, live ${difference.live} (${file}:${next.line})`
}

/**
 * A recorded response as the adapter streamed it: the same chunks, then the same end. A
 * cancelled call waits for its own cancellation while `waitUnless` is given and not
 * aborted (another session's failure would leave it waiting forever); without it, it
 * ends cancelled at once.
 */
async function* playResponse(response: RecordedResponse, signal: AbortSignal, waitUnless: AbortSignal | undefined): AsyncGenerator<LlmChunk, void, undefined> {
  for (const chunk of response.chunks) {
    throwIfAborted(signal)
    yield chunk
  }
  switch (response.end) {
    case 'finish':
      return
    case 'error': {
      const recorded = response.error!
      if (recorded.code !== undefined) {
        const error = new LlmError(recorded.code, recorded.message, recorded.status !== undefined ? { status: recorded.status } : undefined)
        throw error
      }
      const error = new Error(recorded.message)
      error.name = recorded.name
      throw error
    }
    case 'aborted': {
      if (waitUnless === undefined) throw abortError()
      const stop = AbortSignal.any([signal, waitUnless])
      await new Promise<void>((resolvePromise) => {
        if (stop.aborted) resolvePromise()
        else stop.addEventListener('abort', () => resolvePromise(), { once: true })
      })
      throwIfAborted(signal)
      throw new RecordingError('REPLAY_DIVERGED', 'replay: this call was cancelled in the recording, but another session diverged before cancelling it')
    }
  }
}

function throwIfAborted(signal: AbortSignal): void {
  if (signal.aborted) throw abortError()
}

function abortError(): Error {
  const error = new Error('the model request was aborted')
  error.name = 'AbortError'
  return error
}

/**
 * The `replay` adapter: `replay:DIR` replays the recordings in DIR. One `Replay` per
 * directory, created (and every file checked) by `prepare` or the first request.
 */
export class ReplayAdapter implements LlmAdapter {
  private replays = new Map<string, Replay>()

  constructor(
    readonly name: string,
    private readonly lineage: Lineage,
    private readonly facts: (sessionId: string) => SessionFacts | undefined,
    private readonly ids: SessionIdMask,
  ) {}

  async prepare(model: string): Promise<void> {
    this.replayOf(model)
  }

  async *stream(request: LlmRequest): AsyncGenerator<LlmChunk, void, undefined> {
    yield* this.replayOf(request.model).stream(request)
  }

  /** Answer `request` from the recordings in `dir`, whatever model it named. */
  async *streamFrom(dir: string, request: LlmRequest): AsyncGenerator<LlmChunk, void, undefined> {
    yield* this.replayOf(dir).stream(request)
  }

  /** What every replayed directory reports (see `Replay.problems`). */
  problems(): string[] {
    return [...this.replays.values()].flatMap((replay) => replay.problems())
  }

  /** The replay of `dir`, created (and every file in it checked) on first use. */
  replayOf(dir: string): Replay {
    const key = resolve(dir)
    let replay = this.replays.get(key)
    if (!replay) {
      replay = new Replay(dir, this.lineage, this.facts, this.ids)
      this.replays.set(key, replay)
    }
    return replay
  }
}
