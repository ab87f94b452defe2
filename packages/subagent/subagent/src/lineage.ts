/**
 * The lineage of a delegation: what a child is told about where it stands in the tree,
 * the one type that crosses every boundary. In this process it is part of the child's
 * session header; to an ACP agent it travels in `_meta.dsh` of `session/new` and
 * `session/load`; to an A2A worker in the message's `metadata.dsh`; to a queue worker in
 * the job's data. A `dsh acp` or `dsh
 * a2a serve` child records what it receives in its own header, so session trees, the depth
 * bound and recordings reach across processes.
 *
 * Adding a field is one change here: the `Lineage` member, its rule in `FIELD_RULES` (how
 * a peer's value is read, and whether a malformed one is dropped or refused), and which
 * wires carry it (`ACP_LINEAGE`, `A2A_LINEAGE`, `QUEUE_LINEAGE`, `HEADER_FIELDS`; a header field also needs
 * its place in `@dsh/session`'s `SessionHeader`).
 */
import { isRecord } from '@dsh/base'
import type { RecordingLink } from '@dsh/llm'
import type { SessionHeader, SessionInit } from '@dsh/session'
import { SubagentError } from './errors.js'
import type { SubagentRequest } from './types.js'

export interface Lineage {
  /** The delegating parent's session id. */
  parentSession: string
  /** The child's own depth: the parent's plus one. */
  delegationDepth: number
  /** The provider that made the child. */
  provider: string
  /** A short human label (the delegation's description). */
  label?: string
  /** The absolute depth bound the child inherits and applies to its own children. */
  maxDepth?: number
  /** The parent's tool call that asked for the child (the session header only). */
  toolCallId?: string
  /** Where, and under which lineage key, the child records or replays its model calls (ACP only; see `@dsh/llm-replay`). */
  recording?: RecordingLink
}

export type LineageField = keyof Lineage

/** What a peer sent, once read: any field may be missing (a client that is not dsh sends none). */
export type ReceivedLineage = Partial<Lineage>

/** Who hears that a peer's lineage field was malformed and dropped. */
export interface LineageWarnings {
  warn(format: string, ...args: unknown[]): void
}

interface FieldRule<K extends LineageField> {
  /** The field as read from a peer, or `undefined` when it is malformed. */
  read(value: unknown): Lineage[K] | undefined
  /**
   * A malformed value refuses the whole lineage (`INVALID_REQUEST`) instead of being
   * dropped with a warning: the recording link, since a session its parent replays must
   * never reach a real model.
   */
  strict?: true
  /** How the refusal describes the expected value (strict fields). */
  expected?: string
}

const SESSION_ID = /^[A-Za-z0-9._-]{1,128}$/
const LINEAGE_KEY = /^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$/

const depth = (value: unknown): number | undefined => (Number.isSafeInteger(value) && (value as number) >= 0 ? (value as number) : undefined)

/** How each field is read from a peer; the one place a field's validation is written. */
const FIELD_RULES: { readonly [K in LineageField]-?: FieldRule<K> } = {
  parentSession: { read: (value) => (typeof value === 'string' && SESSION_ID.test(value) ? value : undefined) },
  delegationDepth: { read: depth },
  provider: { read: (value) => (typeof value === 'string' && value.length <= 64 ? value : undefined) },
  label: { read: (value) => (typeof value === 'string' ? value.slice(0, 200) : undefined) },
  maxDepth: { read: depth },
  toolCallId: { read: (value) => (typeof value === 'string' && value.length > 0 && value.length <= 256 ? value : undefined) },
  recording: {
    read: (value) => {
      if (!isRecord(value)) return undefined
      const { mode, dir, lineage } = value
      if ((mode !== 'record' && mode !== 'replay') || typeof dir !== 'string' || !dir.startsWith('/') || typeof lineage !== 'string' || !LINEAGE_KEY.test(lineage)) return undefined
      return { mode, dir, lineage }
    },
    strict: true,
    expected: '{ mode: "record" | "replay", dir: an absolute path, lineage: a lineage key }',
  },
}

/**
 * A wire's lineage codec: the fields it carries, the encoder (a `Lineage` as the JSON
 * object the wire sends) and the validating decoder (what a peer sent, never trusted).
 */
export class LineageWire {
  constructor(
    /** Where the object travels, as messages name it: `_meta.dsh`, `metadata.dsh`. */
    readonly where: string,
    /** What the messages call the carrying request: `session/new`, `the A2A message`. */
    private readonly carrier: string,
    readonly fields: readonly LineageField[],
  ) {}

  /** The wire's envelope (`_meta`, `metadata`) with this lineage under its `dsh` key. */
  carry(lineage: Readonly<ReceivedLineage>): { dsh: Record<string, unknown> } {
    return { dsh: this.encode(lineage) }
  }

  /** The lineage in an envelope a peer sent (`params._meta`, `message.metadata`): `decode` of its `dsh` key. */
  read(envelope: unknown, warnings: LineageWarnings, carrier = this.carrier): ReceivedLineage {
    return this.decode(isRecord(envelope) ? envelope.dsh : undefined, warnings, carrier)
  }

  /** The object this wire sends: the fields it carries that are set, nothing else. */
  encode(lineage: Readonly<ReceivedLineage>): Record<string, unknown> {
    const encoded: Record<string, unknown> = {}
    for (const field of this.fields) if (lineage[field] !== undefined) encoded[field] = lineage[field]
    return encoded
  }

  /**
   * What a peer sent in `dsh` (the value under the wire's `dsh` key): a malformed field is
   * left out with one warning naming it; a malformed strict field refuses the lineage
   * (`INVALID_REQUEST`). Fields this wire does not carry are ignored.
   */
  decode(dsh: unknown, warnings: LineageWarnings, carrier = this.carrier): ReceivedLineage {
    if (dsh === undefined) return {}
    if (!isRecord(dsh)) {
      warnings.warn('ignoring %s of %s: not an object', this.where, carrier)
      return {}
    }
    const lineage: Record<string, unknown> = {}
    const dropped: string[] = []
    for (const field of this.fields) {
      const value = dsh[field]
      if (value === undefined) continue
      const rule: FieldRule<LineageField> = FIELD_RULES[field]
      const read = rule.read(value)
      if (read !== undefined) lineage[field] = read
      else if (rule.strict) throw new SubagentError('INVALID_REQUEST', `${this.where}.${field} must be ${rule.expected}`)
      else dropped.push(field)
    }
    if (dropped.length > 0) warnings.warn('ignoring malformed %s field(s) of %s: %s', this.where, carrier, dropped.join(', '))
    return lineage as ReceivedLineage
  }
}

/** ACP: `_meta.dsh` of `session/new` and `session/load` (`dsh acp` reads it). */
export const ACP_LINEAGE = new LineageWire('_meta.dsh', 'session/new', ['parentSession', 'delegationDepth', 'provider', 'label', 'maxDepth', 'recording'])

/** A2A: the message's `metadata.dsh` (`dsh a2a serve` reads it). */
export const A2A_LINEAGE = new LineageWire('metadata.dsh', 'the A2A message', ['parentSession', 'delegationDepth', 'provider', 'label', 'maxDepth'])

/** A job queue: the job data's `lineage` (`dsh worker` reads it); the tool call names the job, so it travels too. */
export const QUEUE_LINEAGE = new LineageWire('job.data.lineage', 'the queue job', ['parentSession', 'delegationDepth', 'provider', 'label', 'maxDepth', 'toolCallId'])

/** The lineage fields a session header records (the recording link is adopted, not recorded). */
export const HEADER_FIELDS = ['parentSession', 'delegationDepth', 'provider', 'label', 'maxDepth', 'toolCallId'] as const satisfies readonly (LineageField & keyof SessionHeader)[]

/**
 * The lineage of a child of `request.parent` made by `provider`: the one place it is read
 * off a delegation. `maxDepth` is the effective bound (see `effectiveMaxDepth`), which the
 * child applies to its own children.
 */
export function lineageOf(request: Pick<SubagentRequest, 'parent' | 'label' | 'callId'>, provider: string, maxDepth: number | undefined): Lineage {
  // Key by key, every key present: one object shape for every child of a fan-out.
  return {
    parentSession: request.parent.id,
    delegationDepth: request.parent.depth + 1,
    provider,
    label: request.label,
    maxDepth,
    toolCallId: request.callId,
  }
}

/**
 * The session header's encoder: the header fields of a child's session with this lineage
 * (`origin`, `cwd` and the rest are the caller's). Absent values stay absent: the store
 * skips `undefined` keys.
 */
export function lineageHeader(lineage: Readonly<ReceivedLineage>): Pick<SessionInit, (typeof HEADER_FIELDS)[number]> {
  return {
    parentSession: lineage.parentSession,
    delegationDepth: lineage.delegationDepth,
    provider: lineage.provider,
    label: lineage.label,
    maxDepth: lineage.maxDepth,
    toolCallId: lineage.toolCallId,
  }
}
