/**
 * `dsh a2a serve`'s part in the approval broker (`@dsh/approvals`): what the broker cannot
 * decide by its rules, for a task's agent or any in-process agent below it, is asked of
 * the task's caller through the protocol's own way, the `input-required` state
 * (`task-run.ts` holds a task's requests and puts them one at a time); with
 * `permission: allow | reject` the server decides alone, as `dsh acp --permission` does,
 * except that `allow` never widens what a task a dsh parent delegated may do: where its
 * lineage does not say its root allows what no rule decides, the request is asked as under
 * `ask` (or rejected, when nobody here may answer it).
 *
 * This file is the wire: what an `input-required` status says (a text a person can read,
 * and a data part a client can act on, `A2aApprovalRequest`), and how the caller's next
 * message on the task is read as the answer (`readAnswer`): a data part
 * `{ approval: ID, decision: allow-once | allow-always | reject, reason? }`, or plain text
 * (`yes`, `always`, `no`; any other text is a rejection whose reason is that text, so the
 * agent hears what its caller said). A dsh parent (the `a2a` provider) says who really
 * decided in the message's `metadata.dsh.decision`, which is what the task's session records.
 */
import { RequestMalformedError } from '@a2a-js/sdk/errors'
import type { Message, Part } from '@a2a-js/sdk'
import { assertNever, isRecord } from '@dsh/base'
import { ANSWER_DECISIONS, decodeProvenance, encodeForwarded, isAnswerDecision, type AnswerDecision, type ApprovalFrontEnd, type ApprovalRequestInfo, type ApprovalService, type DecisionProvenance, type FrontEndAnswer, type IdentifiedApproval, type PermissionPolicy } from '@dsh/approvals'
import { textPart } from './events.js'

/**
 * `ask`: asked through `input-required`, of the party `Answerer` names; `allow` / `reject`:
 * the server decides alone what no rule decided (`allow` only where the task's lineage lets
 * it: see `installPermission`).
 */
export type { PermissionPolicy } from '@dsh/approvals'

/**
 * Who answers an `input-required` request under `permission: ask`. A task's caller must
 * not approve its own side effects unless the operator trusts callers: anyone who reaches
 * the server (any local process, on a loopback worker without a token) could start a task
 * and say yes to it.
 *
 * - `approver`: only a message carrying the approver's token (`approverToken`);
 * - `caller`: whoever may send to the task (`trustCallerApprovals`, e.g. a dsh parent
 *   whose own user answers through its broker);
 * - `nobody` (neither configured): the server rejects the request at once, saying what to
 *   configure.
 */
export type Answerer = 'approver' | 'caller' | 'nobody'

/** The key of the data part an `input-required` status carries: `{ approvalRequest: A2aApprovalRequest }`. */
const APPROVAL_REQUEST_KEY = 'approvalRequest'

/**
 * The structured request in an `input-required` status (a data part), for a client that
 * answers by id, and for a dsh parent, whose broker asks its own front-end with the whole
 * path and never decides more permissively than this side's rules: the approval wire's
 * request (`@dsh/approvals`: `id`, `below`, `tool`, `subject`, `kind`, `policy?`), with
 * when it expires and the answers it takes.
 */
export interface A2aApprovalRequest extends IdentifiedApproval {
  /** When it is rejected if nobody answers (ISO 8601). */
  expiresAt: string
  decisions: AnswerDecision[]
}

/** A caller's answer, read from its message. */
export interface A2aAnswer {
  /** The request it names; `undefined` for plain text, which answers the request being asked. */
  id: string | undefined
  decision: AnswerDecision
  reason?: string
  /** Who sent it (`CALLER`, `APPROVER`). */
  from: string
  /** Who decided, when a dsh parent says so (`metadata.dsh.decision`); the reason is the answer's own. */
  provenance: Omit<DecisionProvenance, 'reason'>
}

/** Who answers, as decisions record it. */
export const CALLER = 'the A2A caller'
export const APPROVER = 'the A2A approver'

/** Why a request is rejected when nobody is configured to answer it (the default). */
export const NOBODY_ANSWERS =
  "dsh a2a serve does not let a task's caller approve its own side effects, and no approver is configured: start it with --approver-token-env NAME (answers then need that token) or --trust-caller-approvals (the caller answers), or allow the command by a rule"

const MAX_ID_CHARS = 200
const MAX_REASON_CHARS = 500

/** The text and data parts of the `input-required` status that asks `request`. */
export function approvalParts(request: ApprovalRequestInfo, answerer: Answerer = 'caller'): Part[] {
  const asked: A2aApprovalRequest = {
    id: request.id,
    ...encodeForwarded(request),
    expiresAt: new Date(request.expiresAt).toISOString(),
    decisions: [...ANSWER_DECISIONS],
  }
  const why = request.policy === 'ask' ? ` (${request.rule !== undefined ? `the rule ${request.rule}` : 'a rule'} asks about it)` : ''
  const text =
    `${request.path.join(' › ')} wants to run ${request.tool}: ${request.display}${why}. ` +
    `${answerer === 'approver' ? 'The approver answers on this task (with the approver token, not the caller\'s)' : 'Answer on this task'}: yes (allow once), always (allow this request again in this task's tree) or no; any other text is a no, passed on as the reason. ` +
    `Or send a data part {"approval":"${request.id}","decision":"allow-once"|"allow-always"|"reject"}.`
  return [textPart(text), { content: { $case: 'data', value: { [APPROVAL_REQUEST_KEY]: asked } }, metadata: undefined, filename: '', mediaType: 'application/json' }]
}

const YES = new Set(['yes', 'y', 'allow', 'allow once', 'ok', 'approve'])
const ALWAYS = new Set(['always', 'allow always', 'yes always'])
const NO = new Set(['no', 'n', 'reject', 'deny'])

/**
 * The answer a message carries, or a `RequestMalformedError` saying what is wrong with it
 * (nothing is changed by a refused answer). A data part with an `approval` key is an
 * answer by id; without one, the message's text answers the request being asked.
 */
export function readAnswer(message: Message, from: string = CALLER): A2aAnswer {
  const { reason: _reason, ...provenance } = decodeProvenance(message.metadata, from)
  const answers = message.parts.flatMap((part) => (part.content?.$case === 'data' && isRecord(part.content.value) && 'approval' in part.content.value ? [part.content.value] : []))
  if (answers.length > 1) throw new RequestMalformedError(`the message holds ${answers.length} answers (data parts with "approval"); send one answer per message`)
  const [data] = answers
  if (data !== undefined) {
    const { approval, decision, reason } = data
    if (typeof approval !== 'string' || approval === '' || approval.length > MAX_ID_CHARS) throw new RequestMalformedError(`the answer's "approval" must be the id of the request asked (a string, as its data part's approvalRequest.id gives it); got ${describe(approval)}`)
    if (!isAnswerDecision(decision)) throw new RequestMalformedError(`the answer's "decision" must be one of ${ANSWER_DECISIONS.join(', ')}; got ${describe(decision)}`)
    if (reason !== undefined && typeof reason !== 'string') throw new RequestMalformedError(`the answer's "reason" must be text; got ${describe(reason)}`)
    return { id: approval, decision, ...(reason !== undefined && reason.trim() !== '' && { reason: reason.trim().slice(0, MAX_REASON_CHARS) }), from, provenance }
  }
  const text = message.parts.map((part) => (part.content?.$case === 'text' ? part.content.value : '')).join('\n').trim()
  if (text === '') throw new RequestMalformedError('the message holds no answer: send yes, always or no as text, or a data part {"approval": ID, "decision": "allow-once" | "allow-always" | "reject"}')
  const word = text.toLowerCase().replace(/[.!\s]+$/, '').replace(/\s+/g, ' ')
  if (YES.has(word)) return { id: undefined, decision: 'allow-once', from, provenance }
  if (ALWAYS.has(word)) return { id: undefined, decision: 'allow-always', from, provenance }
  if (NO.has(word)) return { id: undefined, decision: 'reject', from, provenance }
  // Anything else is a no in the caller's words: the agent is told what it said instead.
  return { id: undefined, decision: 'reject', reason: `the ${from === APPROVER ? 'approver' : 'caller'} answered: ${JSON.stringify(text.slice(0, MAX_REASON_CHARS))}`, from, provenance }
}

/** The broker's decision for an answer: who decided is its sender, or whom a dsh parent names. */
export function decisionOf(answer: A2aAnswer): FrontEndAnswer {
  const { by, ...provenance } = answer.provenance
  const who = by ?? answer.from
  switch (answer.decision) {
    case 'allow-once':
    case 'allow-always':
      return { decision: answer.decision, by: who, ...provenance }
    case 'reject':
      return { decision: 'reject', by: who, reason: answer.reason ?? `${answer.from === APPROVER ? 'the approver' : 'the caller'} rejected it`, ...provenance }
    default:
      return assertNever(answer.decision, 'approval decision')
  }
}

function describe(value: unknown): string {
  if (value === undefined) return 'nothing'
  const json = JSON.stringify(value) ?? String(value)
  return json.length > 80 ? `${json.slice(0, 79)}…` : json
}

/** Whose requests the front-end answers: those of a task's agent or an agent below it, by the root of the request's chain. */
export interface ApprovalAsker {
  /** The task whose agent is `rootAgentId`, when one runs here. */
  ask(rootAgentId: string, request: ApprovalRequestInfo, signal: AbortSignal): Promise<FrontEndAnswer> | undefined
  serves(rootAgentId: string): boolean
}

/**
 * Why a request of a task a dsh parent delegated is rejected under `permission: allow` when
 * nobody here may answer it: its root does not allow it (or its lineage does not say).
 */
export const LINEAGE_BOUNDS_ALLOW =
  "dsh a2a serve --permission allow does not widen what a dsh parent's tree allows, and this task's lineage does not allow what no rule decides (its root rejects it, or its parent's dsh is too old to say); its caller may not approve its own side effects: start the server with --trust-caller-approvals (the delegating dsh answers by its own rules and user) or --approver-token-env NAME, or allow the command by a rule in the root's config"

/**
 * Install `policy` on the broker (with `ask`, answered by `answerer`); returns the disposer.
 * Under `allow`, a request of a task whose lineage does not allow what no rule decides (the
 * broker's `defaultFor` its tree) is asked of `answerer` as under `ask`, or rejected saying
 * what to configure: a child never allows more than its ancestors.
 */
export function installPermission(approvals: ApprovalService, policy: PermissionPolicy, tasks: ApprovalAsker, answerer: Answerer = 'caller'): () => void {
  switch (policy) {
    case 'allow': {
      const removeDefault = approvals.setDefault('allow', 'dsh a2a serve --permission allow')
      const bounded = (request: ApprovalRequestInfo) => approvals.defaultFor({ id: request.agentId }).decision !== 'allow'
      const removeFrontEnd = approvals.addFrontEnd(answerer === 'nobody' ? nobodyFrontEnd(tasks, LINEAGE_BOUNDS_ALLOW, bounded) : callerFrontEnd(tasks, answerer === 'approver' ? APPROVER : CALLER, bounded))
      return () => {
        removeFrontEnd()
        removeDefault()
      }
    }
    case 'reject':
      return approvals.setDefault('reject', 'dsh a2a serve --permission reject')
    case 'ask':
      return approvals.addFrontEnd(answerer === 'nobody' ? nobodyFrontEnd(tasks) : callerFrontEnd(tasks, answerer === 'approver' ? APPROVER : CALLER))
    default:
      return assertNever(policy, 'permission policy')
  }
}

/** The task's caller (or approver) as the front-end of its tasks' requests (those `only` picks, when given). */
function callerFrontEnd(tasks: ApprovalAsker, name: string, only?: (request: ApprovalRequestInfo) => boolean): ApprovalFrontEnd {
  return {
    name,
    // The chain starts with the agent of this process the request comes from: a task's agent is a root here.
    serves: (request) => request.chain[0] !== undefined && tasks.serves(request.chain[0]) && (only === undefined || only(request)),
    ask: (request, signal) => tasks.ask(request.chain[0] ?? '', request, signal) ?? Promise.resolve({ decision: 'reject', by: 'dsh a2a serve', reason: 'the request belongs to no running task, so there is no caller to ask' }),
  }
}

/** The default: a task's requests (those `only` picks) are rejected at once, saying what the operator can configure (the caller is not asked). */
function nobodyFrontEnd(tasks: ApprovalAsker, reason = NOBODY_ANSWERS, only?: (request: ApprovalRequestInfo) => boolean): ApprovalFrontEnd {
  return {
    name: 'dsh a2a serve',
    serves: (request) => request.chain[0] !== undefined && tasks.serves(request.chain[0]) && (only === undefined || only(request)),
    ask: () => Promise.resolve({ decision: 'reject', by: 'dsh a2a serve', source: 'default', reason }),
  }
}
