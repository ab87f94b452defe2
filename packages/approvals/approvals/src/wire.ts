/**
 * The approval wire: what one dsh process tells another about a side effect, written
 * once for every transport. `dsh acp` and `dsh a2a serve` send the request their broker
 * left to ask up to a dsh parent (a forwarded request); the parent's provider sends back
 * the decision with who really decided (its provenance, in `dsh.decision` of the answer's
 * metadata); the CLI, the servers and the web page read a permission policy or a
 * decision a person typed. ACP carries the request in `_meta.dsh.approval`, A2A in an
 * `input-required` data part (`approvalRequest`, with an `id`); both carry provenance in
 * `dsh.decision`.
 *
 * Everything read here comes from a peer or a person: each decoder checks every field and
 * never throws. A malformed request is refused whole, with the field it failed on (the
 * caller then treats it as a plain protocol request); a malformed provenance field is
 * left out, the rest kept.
 */
import { isRecord, PERMISSION_DECISIONS, PERMISSION_SOURCES, type PermissionDecision, type PermissionSource } from '@dsh/base'
import type { ApprovalRequestInfo } from './types.js'
import type { ApprovalKind } from './subject.js'

/** A decoded value, or why it was refused (one clause naming the field). */
export type WireRead<T> = { ok: true; value: T } | { ok: false; problem: string }

/** A request a dsh process forwards to its parent: who below asked, and what a rule here said. */
export interface ForwardedApproval {
  /** The agents below the forwarding process's own agent, down to the one that asked (empty: that agent). */
  below: string[]
  tool: string
  /** The call's subject (a command, a path, compact JSON), as rules match it. */
  subject: string
  /** How rules read the subject; `other` when the peer did not say. */
  kind: ApprovalKind
  /** `ask`: a rule of the forwarding process asks about it; absent: no rule there had an opinion. */
  policy?: 'ask'
  /** `false`: a call of a tool without side effects (`read`), asked up only for an ancestor's verdict sources: no rule or default decides it. */
  sideEffect?: false
}

/** A forwarded request the answer names by id (A2A's `approvalRequest`). */
export interface IdentifiedApproval extends ForwardedApproval {
  id: string
}

/** Who really decided, as a dsh parent says in `dsh.decision`. */
export interface DecisionProvenance {
  by?: string
  source?: PermissionSource
  rule?: string
  at?: number
  reason?: string
}

/** A tool's name as rules name it. */
export const TOOL_NAME = /^[A-Za-z0-9_.-]{1,64}$/
const MAX_BELOW = 32
const MAX_NAME_CHARS = 200
const MAX_SUBJECT_CHARS = 16_384
const MAX_ID_CHARS = 200
const MAX_BY_CHARS = 200
/** `by` keeps this much when a hop is named after it, so the whole stays within `MAX_BY_CHARS`. */
const MAX_BY_BEFORE_HOP = 160
const MAX_RULE_CHARS = 600
const MAX_REASON_CHARS = 500
const KINDS: readonly ApprovalKind[] = ['execute', 'edit', 'other']

/** The forwarded form of a request this process's broker puts to a front-end. */
export function encodeForwarded(request: ApprovalRequestInfo): ForwardedApproval {
  // The path starts with the forwarding process's own agent, which the parent knows as its child.
  return { below: request.path.slice(1), tool: request.tool, subject: request.subject, kind: request.kind, ...(request.policy === 'ask' && { policy: 'ask' as const }), ...(request.sideEffect === false && { sideEffect: false as const }) }
}

/** A forwarded request read from a peer: every field checked, the first bad one named. */
export function decodeForwarded(value: unknown): WireRead<ForwardedApproval> {
  if (!isRecord(value)) return refused(`the request is not an object (got ${shown(value)})`)
  const { below, tool, subject, kind, policy, sideEffect } = value
  if (!Array.isArray(below) || below.length > MAX_BELOW) return refused(`"below" must be a list of at most ${MAX_BELOW} agent names (got ${shown(below)})`)
  if (!below.every((name) => typeof name === 'string' && name.length <= MAX_NAME_CHARS)) return refused(`"below" must hold names of at most ${MAX_NAME_CHARS} characters (got ${shown(below)})`)
  if (typeof tool !== 'string' || !TOOL_NAME.test(tool)) return refused(`"tool" must be a tool name (letters, digits, _ . -, at most 64) (got ${shown(tool)})`)
  if (typeof subject !== 'string' || subject.length > MAX_SUBJECT_CHARS) return refused(`"subject" must be text of at most ${MAX_SUBJECT_CHARS} characters (got ${shown(subject)})`)
  if (kind !== undefined && !(KINDS as readonly unknown[]).includes(kind)) return refused(`"kind" must be one of ${KINDS.join(', ')} (got ${shown(kind)})`)
  if (policy !== undefined && policy !== 'ask') return refused(`"policy" must be "ask" or absent (got ${shown(policy)})`)
  if (sideEffect !== undefined && sideEffect !== false) return refused(`"sideEffect" must be false or absent (got ${shown(sideEffect)})`)
  return { ok: true, value: { below: below as string[], tool, subject, kind: (kind as ApprovalKind | undefined) ?? 'other', ...(policy === 'ask' && { policy }), ...(sideEffect === false && { sideEffect }) } }
}

/** A forwarded request with the id its answer names (A2A's `approvalRequest`). */
export function decodeIdentified(value: unknown): WireRead<IdentifiedApproval> {
  const id = isRecord(value) ? value.id : undefined
  if (typeof id !== 'string' || id === '' || id.length > MAX_ID_CHARS) return refused(`"id" must be a non-empty string of at most ${MAX_ID_CHARS} characters (got ${shown(id)})`)
  const forwarded = decodeForwarded(value)
  return forwarded.ok ? { ok: true, value: { id, ...forwarded.value } } : forwarded
}

/** The provenance a parent sends back with `decision`: who, what kind, the rule, when, and why a rejection. */
export function encodeProvenance(decision: PermissionDecision): DecisionProvenance {
  return {
    by: decision.by,
    ...(decision.source !== undefined && { source: decision.source }),
    ...(decision.rule !== undefined && { rule: decision.rule }),
    ...(decision.at !== undefined && { at: decision.at }),
    ...(decision.decision === 'reject' && { reason: decision.reason }),
  }
}

/** A message's metadata carrying `decision`'s provenance (`{ dsh: { decision } }`). */
export function provenanceMeta(decision: PermissionDecision): { dsh: { decision: DecisionProvenance } } {
  return { dsh: { decision: encodeProvenance(decision) } }
}

/** The fields of `value` that are a valid provenance, each checked and bounded; anything else is left out. */
export function provenanceFields(value: unknown): DecisionProvenance {
  if (!isRecord(value)) return {}
  const { by, source, rule, at, reason } = value
  return {
    ...(typeof by === 'string' && by !== '' && { by: by.slice(0, MAX_BY_CHARS) }),
    ...((PERMISSION_SOURCES as readonly unknown[]).includes(source) && { source: source as PermissionSource }),
    ...(typeof rule === 'string' && { rule: rule.slice(0, MAX_RULE_CHARS) }),
    ...(typeof at === 'number' && Number.isSafeInteger(at) && { at }),
    ...(typeof reason === 'string' && reason !== '' && { reason: reason.slice(0, MAX_REASON_CHARS) }),
  }
}

/**
 * Who decided, read from a message's metadata (`dsh.decision`) that came through `hop`
 * (`the ACP client`, `the A2A caller`): `by` names the hop once, however many dsh
 * processes the answer came down through.
 */
export function decodeProvenance(meta: unknown, hop: string): DecisionProvenance {
  const decision = isRecord(meta) && isRecord(meta.dsh) ? meta.dsh.decision : undefined
  const read = provenanceFields(decision)
  if (read.by === undefined) return read
  const through = ` (through ${hop})`
  const by = read.by.endsWith(through) ? read.by : `${read.by.slice(0, MAX_BY_BEFORE_HOP)}${through}`
  return { ...read, by }
}

/** The decisions a person or a parent answers with. */
export const ANSWER_DECISIONS = PERMISSION_DECISIONS
export type AnswerDecision = PermissionDecision['decision']

/** Whether `value` is one of `ANSWER_DECISIONS`. */
export function isAnswerDecision(value: unknown): value is AnswerDecision {
  return (ANSWER_DECISIONS as readonly unknown[]).includes(value)
}

/** Who decides what no rule decided: `ask` someone, or `allow` / `reject` unasked. */
export type PermissionPolicy = 'ask' | 'allow' | 'reject'
export const PERMISSION_POLICIES: readonly PermissionPolicy[] = ['ask', 'allow', 'reject']

/**
 * `raw` as a policy, or the one refusal (`must be one of ask, allow, reject (got …)`) for
 * the caller to prefix with what it read (`dsh run: --permission`). What a person typed is
 * quoted (`"sometimes"`); a value a program passed (`typed: false`) is shown as it prints.
 */
export function parsePermissionPolicy(raw: unknown, typed = true): WireRead<PermissionPolicy> {
  const policy = PERMISSION_POLICIES.find((candidate) => candidate === raw)
  if (policy !== undefined) return { ok: true, value: policy }
  return refused(`must be one of ${PERMISSION_POLICIES.join(', ')} (got ${typed ? JSON.stringify(printed(raw)) : printed(raw)})`)
}

/** A front-end's answer, checked (its provenance as the wire's is): anything else is a rejection saying so. */
export function answerDecision(answer: unknown, frontEnd: string): PermissionDecision {
  const at = Date.now()
  if (!isRecord(answer) || !isAnswerDecision(answer.decision)) {
    return { decision: 'reject', by: frontEnd, reason: `${frontEnd} gave an answer that is not a decision`, source: 'user', at }
  }
  const fields = provenanceFields(answer)
  const by = fields.by ?? frontEnd
  const provenance = { source: fields.source ?? 'user', at: fields.at ?? at, ...(fields.rule !== undefined && { rule: fields.rule }) }
  if (answer.decision === 'reject') return { decision: 'reject', by, reason: fields.reason ?? 'rejected', ...provenance }
  return { decision: answer.decision, by, ...provenance }
}

function refused(problem: string): { ok: false; problem: string } {
  return { ok: false, problem }
}

/** A peer's value in a refusal: its JSON, shortened. */
function shown(value: unknown): string {
  if (value === undefined) return 'nothing'
  let json: string | undefined
  try {
    json = JSON.stringify(value)
  } catch {
    // A cycle or a BigInt: said as it prints instead.
  }
  const said = json ?? printed(value)
  return said.length > 80 ? `${said.slice(0, 79)}…` : said
}

/** `String(value)`, which throws for an object without a prototype. */
function printed(value: unknown): string {
  try {
    return String(value)
  } catch {
    return Object.prototype.toString.call(value)
  }
}
