/**
 * Which sessions are recorded or replayed, and where. A process has at most one default
 * link (`record: DIR`, or a `replay:DIR` default model) for its own root sessions; an
 * ACP session whose parent runs in another process is given its own link by that parent
 * (`adopt`). A session follows the link of its in-process root, so every child of a
 * recorded or replayed session is recorded or replayed too. Every resolved adapter is
 * wrapped: a request of a linked session is recorded through the adapter, or answered by
 * the replay and never by the adapter.
 */
import { resolve } from 'node:path'
import type { PermissionDecision } from '@dsh/base'
import type { LlmAdapter, LlmChunk, LlmRequest, RecordingLink, RecordingLinks } from '@dsh/llm'
import { lineageSegment } from './format.js'
import type { Lineage, SessionFacts } from './lineage.js'
import { Recorder } from './recorder.js'
import type { ReplayAdapter } from './replayer.js'
import type { SessionIdMask } from './session-ids.js'

/** The default link of a process, before it knows any lineage. */
export interface DefaultLink {
  mode: 'record' | 'replay'
  dir: string
}

export class RecordingRouter implements RecordingLinks {
  private assigned = new Map<string, RecordingLink>()
  private recorders = new Map<string, Recorder>()
  private wrapped = new WeakMap<LlmAdapter, LlmAdapter>()
  private untracedChildren = new Map<string, number>()

  constructor(
    private readonly lineage: Lineage,
    private readonly facts: (sessionId: string) => SessionFacts | undefined,
    private readonly ids: SessionIdMask,
    private readonly replay: ReplayAdapter,
    private readonly defaultLink: DefaultLink | undefined,
  ) {
    // A fresh recording replaces the files of an earlier one, once, at start.
    if (defaultLink?.mode === 'record') this.recorderOf(defaultLink.dir, true)
  }

  /** The key an adopted session was given (for `Lineage`). */
  assignedKey(sessionId: string): string | undefined {
    return this.assigned.get(sessionId)?.lineage
  }

  childLink(parentSession: string, callId: string | undefined): RecordingLink | undefined {
    const link = this.linkOf(parentSession)
    if (!link) return undefined
    const parentKey = this.lineage.keyOf(parentSession)
    let segment: string
    if (callId !== undefined) segment = lineageSegment(callId)
    else {
      const ordinal = (this.untracedChildren.get(parentKey) ?? 0) + 1
      this.untracedChildren.set(parentKey, ordinal)
      segment = `remote-${ordinal}`
    }
    const lineage = `${parentKey}.${segment}`
    if (link.mode === 'replay') this.replay.replayOf(link.dir).delegate(lineage)
    return { mode: link.mode, dir: link.dir, lineage }
  }

  adopt(sessionId: string, link: RecordingLink): void {
    const adopted = { ...link, dir: resolve(link.dir) }
    // Checked now: a broken recording fails the session before it starts.
    if (adopted.mode === 'replay') this.replay.replayOf(adopted.dir).scopeTo(adopted.lineage)
    else this.recorderOf(adopted.dir, false)
    this.assigned.set(sessionId, adopted)
  }

  wrap(adapter: LlmAdapter): LlmAdapter {
    if (adapter === this.replay) return adapter
    let wrapper = this.wrapped.get(adapter)
    if (!wrapper) {
      wrapper = {
        name: adapter.name,
        ...(adapter.defaultModel !== undefined && { defaultModel: adapter.defaultModel }),
        ...(adapter.prepare && { prepare: (model: string) => adapter.prepare!(model) }),
        stream: (request) => this.route(adapter, request),
      }
      this.wrapped.set(adapter, wrapper)
    }
    return wrapper
  }

  private route(adapter: LlmAdapter, request: LlmRequest): AsyncIterable<LlmChunk> {
    // The usual case, nothing recorded or replayed: no look-up on the request path.
    if (this.defaultLink === undefined && this.assigned.size === 0) return adapter.stream(request)
    const link = this.linkOf(request.origin.sessionId)
    if (!link) return adapter.stream(request)
    if (link.mode === 'replay') return this.replay.streamFrom(link.dir, request)
    return this.recorderOf(link.dir, false).record(adapter, request)
  }

  /**
   * A decision of the approval broker for a session: recorded when the session is
   * recorded (a rule's decision is not: rules decide again), answered from the recording
   * when it is replayed; `undefined` otherwise (decide it live).
   */
  approval(sessionId: string, tool: string, subject: string, decided?: PermissionDecision): PermissionDecision | undefined {
    if (this.defaultLink === undefined && this.assigned.size === 0) return undefined
    const link = this.linkOf(sessionId)
    if (!link) return undefined
    if (link.mode === 'replay') return decided === undefined ? this.replay.replayOf(link.dir).approval(sessionId, tool, subject) : undefined
    if (decided !== undefined && decided.source !== 'rule') this.recorderOf(link.dir, false).recordApproval(sessionId, tool, subject, decided)
    return undefined
  }

  private linkOf(sessionId: string): DefaultLink | undefined {
    return this.assigned.get(this.rootOf(sessionId)) ?? this.defaultLink
  }

  /** The session's ancestor in this process that has no parent here. */
  private rootOf(sessionId: string): string {
    let current = sessionId
    for (let guard = 0; guard < 10_000; guard++) {
      if (this.assigned.has(current)) return current
      const parent = this.facts(current)?.header.parentSession
      if (parent === undefined || this.facts(parent) === undefined) return current
      current = parent
    }
    return current
  }

  private recorderOf(dir: string, fresh: boolean): Recorder {
    const key = resolve(dir)
    let recorder = this.recorders.get(key)
    if (!recorder) {
      recorder = new Recorder(key, fresh, this.lineage, this.facts, this.ids)
      this.recorders.set(key, recorder)
    }
    return recorder
  }
}
