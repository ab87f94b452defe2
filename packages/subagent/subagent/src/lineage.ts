/**
 * The lineage of a delegation: what a child is told about where it stands in the tree,
 * the one type that crosses every boundary. In this process it is part of the child's
 * session header; to an ACP agent it travels in `_meta.dsh` of `session/new` and
 * `session/load`; to an A2A worker in the message's `metadata.dsh`; to a queue worker in
 * the job's data. The trace context is the one field that travels beside `dsh` instead of
 * in it: W3C `traceparent` and `tracestate` are root keys of the envelope (`_meta`,
 * `metadata`, the job's data), where any traced peer, dsh or not, looks for them. A `dsh acp` or `dsh
 * a2a serve` child records what it receives in its own header, so session trees, the depth
 * bound and recordings reach across processes.
 *
 * Adding a field is one change here: the `Lineage` member, its rule in `FIELD_RULES` (how
 * a peer's value is read, and whether a malformed one is dropped or refused), and which
 * wires carry it (`ACP_LINEAGE`, `A2A_LINEAGE`, `QUEUE_LINEAGE`, `HEADER_FIELDS`; a header field also needs
 * its place in `@dsh/session`'s `SessionHeader`).
 */
import { isRecord } from '@dsh/base'
import { serviceInstance, type Agent } from '@dsh/agent'
import type { RecordingLink } from '@dsh/llm'
import { cleanPermissionLevel, joinPermissionLevels, permissionLevelsProblem, readDelegationBudget, type DelegationBudget, type PermissionLevel, type SessionHeader, type SessionInit, type TraceContext } from '@dsh/session'
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
  /**
   * The W3C trace context of the delegating tool call, when a tracer runs (`@dsh/tracing`):
   * the child's spans go under that call's span, in whatever process the child runs.
   */
  trace?: TraceContext
  /**
   * The permission rules the child is under besides its own process's: its ancestors'
   * (every process up the chain) and its helper definition's, outermost first. A child's
   * broker (`@dsh/approvals`) applies them with its own, so no child may do what an
   * ancestor's rules deny or ask about, however many processes down it runs.
   */
  permissions?: readonly PermissionLevel[]
  /**
   * What the child and its descendants may still use (the tree gate's `remainingFor`): a
   * `dsh acp` or `dsh a2a serve` child bounds its own tree by it, its own calls included.
   */
  budget?: DelegationBudget
  /**
   * With nobody to ask, what the child's ancestors let happen to a side effect no rule
   * decides: the most restrictive approvals default of every process up the chain (its
   * parent's broker's `defaultFor`). A child process never allows more by a default of its
   * own (a `dsh worker`'s `approvals.default: allow`, `dsh a2a serve --permission allow`);
   * absent (a parent older than the field), it allows only what the rules it received do.
   */
  approvalDefault?: 'allow' | 'reject'
}

export type { TraceContext }

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

/**
 * W3C Trace Context, level 1: `version-traceid-parentid-flags`, lowercase hex; version
 * `ff` and all-zero ids are invalid; a future version may append fields after a `-`.
 */
const TRACEPARENT = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-[\x21-\x7e]*)?$/
/** One `tracestate` list member (W3C), keys lowercase; at most 32 of them, 512 characters in all. */
const TRACESTATE_MEMBER = /^[a-z0-9][_0-9a-z\-*/@]{0,255}=[\x20-\x2b\x2d-\x3c\x3e-\x7e]{0,255}[\x21-\x2b\x2d-\x3c\x3e-\x7e]$/

/** A `traceparent` a peer sent, if it is one (never echoed otherwise: a caller says only that it was malformed). */
export function readTraceparent(value: unknown): string | undefined {
  if (typeof value !== 'string' || value.length > 512) return undefined
  const match = TRACEPARENT.exec(value)
  if (!match) return undefined
  const [, version, traceId, parentId, , rest] = match
  if (version === 'ff' || (version === '00' && rest !== undefined)) return undefined
  if (/^0+$/.test(traceId!) || /^0+$/.test(parentId!)) return undefined
  return value
}

/** A `tracestate` a peer sent, if it is one. */
export function readTracestate(value: unknown): string | undefined {
  if (typeof value !== 'string' || value.length > 512) return undefined
  const members = value.split(',').map((member) => member.trim()).filter((member) => member !== '')
  if (members.length > 32 || !members.every((member) => TRACESTATE_MEMBER.test(member))) return undefined
  return members.join(',')
}

/** A trace context from a peer: its `traceparent` must be valid; a malformed `tracestate` alone is dropped. */
export function readTraceContext(value: unknown): TraceContext | undefined {
  if (!isRecord(value)) return undefined
  const traceparent = readTraceparent(value.traceparent)
  if (traceparent === undefined) return undefined
  const tracestate = readTracestate(value.tracestate)
  return tracestate === undefined || tracestate === '' ? { traceparent } : { traceparent, tracestate }
}

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
  trace: { read: readTraceContext },
  permissions: {
    // Refused, never dropped: a child that lost its parent's rules could do what they forbid.
    read: (value) => (permissionLevelsProblem(value, 'permissions') === undefined ? (value as PermissionLevel[]).map(cleanPermissionLevel) : undefined),
    strict: true,
    expected: 'a list of at most 32 permission levels ({ from, allow?, ask?, deny? } with rules like "bash(npm test*)")',
  },
  budget: {
    // Refused, never dropped: a child that lost its budget could spend without limit.
    read: readDelegationBudget,
    strict: true,
    expected: '{ outputTokens?, inputTokens?, cost?, children?, wallTimeMs? } of non-negative numbers',
  },
  approvalDefault: {
    // Refused, never dropped: a peer's malformed value is no place to guess a permission.
    read: (value) => (value === 'allow' || value === 'reject' ? value : undefined),
    strict: true,
    expected: '"allow" or "reject"',
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
    /**
     * Where the trace context goes: beside `dsh`, as the envelope's root `traceparent` and
     * `tracestate` (ACP, A2A: where any traced peer looks), or, on a wire only dsh speaks
     * (a queue job), inside the lineage object as the `trace` field.
     */
    private readonly traceAtRoot = true,
  ) {}

  /** The wire's envelope (`_meta`, `metadata`) with this lineage under its `dsh` key. */
  carry(lineage: Readonly<ReceivedLineage>): { dsh: Record<string, unknown>; traceparent?: string; tracestate?: string } {
    const envelope: { dsh: Record<string, unknown>; traceparent?: string; tracestate?: string } = { dsh: this.encode(lineage) }
    if (lineage.trace !== undefined && this.traceAtRoot && this.fields.includes('trace')) {
      envelope.traceparent = lineage.trace.traceparent
      if (lineage.trace.tracestate !== undefined) envelope.tracestate = lineage.trace.tracestate
    }
    return envelope
  }

  /** The lineage in an envelope a peer sent (`params._meta`, `message.metadata`): `decode` of its `dsh` key. */
  read(envelope: unknown, warnings: LineageWarnings, carrier = this.carrier): ReceivedLineage {
    const lineage = this.decode(isRecord(envelope) ? envelope.dsh : undefined, warnings, carrier)
    if (!this.traceAtRoot || !this.fields.includes('trace') || !isRecord(envelope) || envelope.traceparent === undefined) return lineage
    // A malformed trace context starts a new trace; what it said is never repeated (a log line is no place for a peer's bytes).
    const trace = readTraceContext(envelope)
    if (trace !== undefined) lineage.trace = trace
    else warnings.warn('ignoring a malformed traceparent of %s (a new trace starts)', carrier)
    return lineage
  }

  /** The object this wire sends under `dsh`: the fields it carries that are set, nothing else (the trace context goes beside it, unless this wire carries it inside). */
  encode(lineage: Readonly<ReceivedLineage>): Record<string, unknown> {
    const encoded: Record<string, unknown> = {}
    for (const field of this.fields) if (!(field === 'trace' && this.traceAtRoot) && lineage[field] !== undefined) encoded[field] = lineage[field]
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
      if (field === 'trace' && this.traceAtRoot) continue
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
export const ACP_LINEAGE = new LineageWire('_meta.dsh', 'session/new', ['parentSession', 'delegationDepth', 'provider', 'label', 'maxDepth', 'recording', 'trace', 'permissions', 'budget', 'approvalDefault'])

/** A2A: the message's `metadata.dsh` (`dsh a2a serve` reads it). */
export const A2A_LINEAGE = new LineageWire('metadata.dsh', 'the A2A message', ['parentSession', 'delegationDepth', 'provider', 'label', 'maxDepth', 'trace', 'permissions', 'budget', 'approvalDefault'])

/** A job queue: the job data's `lineage` (`dsh worker` reads it); the tool call names the job, so it travels too. */
export const QUEUE_LINEAGE = new LineageWire('job.data.lineage', 'the queue job', ['parentSession', 'delegationDepth', 'provider', 'label', 'maxDepth', 'toolCallId', 'trace', 'permissions', 'budget', 'approvalDefault'], false)

/** The lineage fields a session header records (the recording link is adopted, not recorded). */
export const HEADER_FIELDS = ['parentSession', 'delegationDepth', 'provider', 'label', 'maxDepth', 'toolCallId', 'trace', 'permissions', 'budget', 'approvalDefault'] as const satisfies readonly (LineageField & keyof SessionHeader)[]

/**
 * The lineage of a child of `request.parent` made by `provider`: the one place it is read
 * off a delegation. `maxDepth` is the effective bound (see `effectiveMaxDepth`), which the
 * child applies to its own children.
 */
export function lineageOf(request: Pick<SubagentRequest, 'parent' | 'label' | 'callId' | 'permissions' | 'budget' | 'approvalDefault'>, provider: string, maxDepth: number | undefined): Lineage {
  // A request `ctx.subagents` passed on says what the broker decided; one built by a
  // provider's own hands (or a direct call) asks the parent's context.
  return lineageWith(request, provider, maxDepth, 'approvalDefault' in request ? request.approvalDefault : approvalDefaultOf(request.parent))
}

/**
 * `lineageOf` with the approvals default already known: the in-process child factory's,
 * which takes it from the request alone (`ctx.subagents` sets it when a broker is composed),
 * so a child never makes its parent a framework context to look for a broker.
 */
export function lineageWith(request: Pick<SubagentRequest, 'parent' | 'label' | 'callId' | 'permissions' | 'budget'>, provider: string, maxDepth: number | undefined, approvalDefault: 'allow' | 'reject' | undefined): Lineage {
  // Key by key, every key present: one object shape for every child of a fan-out.
  return {
    parentSession: request.parent.id,
    delegationDepth: request.parent.depth + 1,
    provider,
    label: request.label,
    maxDepth,
    toolCallId: request.callId,
    trace: traceContextOf(request),
    permissions: permissionsOf(request),
    budget: request.budget,
    approvalDefault,
  }
}

/** The part of `@dsh/approvals`' broker a lineage reads (by shape: the broker is a service beside this one, not a dependency of it). */
export interface ApprovalDefaults {
  defaultFor(agent: Agent): { decision: 'allow' | 'reject'; bound?: 'lineage' | 'unsaid' }
}

/**
 * What a child of `parent` is told its ancestors allow with nobody to ask: its parent's
 * broker's default for the parent's tree (this process's own, bounded by what the tree
 * received). Nothing without a broker, or when the tree's own lineage did not say: the
 * child then allows only what its rules do, as under a parent older than the field.
 */
function approvalDefaultOf(parent: Agent): 'allow' | 'reject' | undefined {
  let broker: Partial<ApprovalDefaults> | undefined
  try {
    const approvals = parent.ctx.get('approvals')
    broker = approvals === undefined ? undefined : (serviceInstance(approvals) as Partial<ApprovalDefaults>)
  } catch {
    // A parent without a context (disposed, or a bare test double) says nothing.
    return undefined
  }
  if (typeof broker?.defaultFor !== 'function') return undefined
  return approvalDefaultFrom(broker as ApprovalDefaults, parent)
}

/** What `broker` tells a child of `parent` (see `approvalDefaultOf`): nothing when the tree's own lineage did not say. */
export function approvalDefaultFrom(broker: ApprovalDefaults, parent: Agent): 'allow' | 'reject' | undefined {
  const found = broker.defaultFor(parent)
  return found.bound === 'unsaid' ? undefined : found.decision
}

/**
 * The permission levels a child of `request` is under besides its own process's: its
 * parent's (from the parent's header), then those the request adds (its process's
 * rules and its helper's, see `SubagentRequest.permissions`). Nothing when neither has
 * any, which is every child of a run without rules.
 */
function permissionsOf(request: Pick<SubagentRequest, 'parent' | 'permissions'>): readonly PermissionLevel[] | undefined {
  const inherited = request.parent.session.header.permissions
  if (inherited === undefined && request.permissions === undefined) return undefined
  return joinPermissionLevels(inherited, request.permissions)
}

/**
 * Where a delegation's trace context comes from: the tracer of this process, when one
 * runs (`@dsh/tracing` sets it while it is loaded; a tracer, like OpenTelemetry's own
 * provider, is one per process). With tracing off nothing is asked and no child pays.
 */
export type TraceContextSource = (parentSession: string, toolCallId: string | undefined) => TraceContext | undefined

let traceContextSource: TraceContextSource | undefined

/** Install the process's trace context source; the returned function removes it (if it is still the one installed). */
export function setTraceContextSource(source: TraceContextSource): () => void {
  traceContextSource = source
  return () => {
    if (traceContextSource === source) traceContextSource = undefined
  }
}

/** The trace context of the delegating call of `request` (its parent's tool call), when a tracer runs. */
export function traceContextOf(request: Pick<SubagentRequest, 'parent' | 'callId'>): TraceContext | undefined {
  return traceContextSource === undefined ? undefined : traceContextSource(request.parent.id, request.callId)
}

/**
 * The environment variables a child program's own OpenTelemetry support reads to continue
 * the trace (`TRACEPARENT`, `TRACESTATE`: Codex, Claude Code), for `request`'s delegation;
 * nothing when no tracer runs.
 */
export function traceEnvironment(request: Pick<SubagentRequest, 'parent' | 'callId'>): Record<string, string> {
  const trace = traceContextOf(request)
  if (trace === undefined) return {}
  return trace.tracestate === undefined ? { TRACEPARENT: trace.traceparent } : { TRACEPARENT: trace.traceparent, TRACESTATE: trace.tracestate }
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
    trace: lineage.trace,
    permissions: lineage.permissions,
    budget: lineage.budget,
    approvalDefault: lineage.approvalDefault,
  }
}
