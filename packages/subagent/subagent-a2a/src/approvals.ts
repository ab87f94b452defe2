/**
 * A worker's `input-required`, as the provider answers it. A `dsh a2a serve` worker asks
 * its caller for what its approval broker left to ask, with a data part
 * `{ approvalRequest: { id, below, tool, subject, kind, policy? } }` (see
 * `@dsh/a2a-server`'s `A2aApprovalRequest`): the provider puts it to the parent's broker
 * (`ctx.approvals`), naming the child and the path below it, never more permissively than
 * the worker's own rules (`policy: 'ask'`), and answers on the same task with the
 * decision and who decided (`metadata.dsh.decision`), which the worker's session records.
 *
 * An `input-required` without that request is an agent asking its caller a question; a
 * delegation has nobody to answer it, so the run ends `error` saying what it asked, and
 * the task is cancelled there (`turn.ts`).
 */
import { randomUUID } from 'node:crypto'
import type { Message } from '@a2a-js/sdk'
import { isRecord, type PermissionDecision } from '@dsh/base'
import { a2aSdk } from './sdk.js'
import type { Agent } from '@dsh/agent'
import { decodeIdentified, provenanceMeta, type ApprovalAsk, type IdentifiedApproval } from '@dsh/approvals'
import type { ReportedDescendant, SubagentRequest } from '@dsh/subagent'

/** Whose side effects a worker's requests are: the delegation, as the parent's broker names it. */
export interface A2aApprovalScope {
  /** The delegating agent, in this process. */
  parent: Agent
  /** The child as the path names it: `a2a "review"`, or its helper's name. */
  name: string
  /** The child's own permission levels beyond its parent's (its helper's). */
  levels?: SubagentRequest['permissions']
  /** A continuable child's id (its record's); a one-shot run's is `<provider>:<task id>`. */
  childId?: string
  /** Told of each agent below the child a dsh worker names (`metadata.dsh.descendants`), already checked. */
  descendant?: (reported: ReportedDescendant) => void
}

/** What a dsh worker's `input-required` asks (its data part's `approvalRequest`: the approval wire's request with an id). */
export type WorkerApproval = IdentifiedApproval

/** The structured request of an `input-required` status message, or `undefined` (a plain question, or anything malformed). */
export function readWorkerApproval(message: Message | undefined): WorkerApproval | undefined {
  for (const part of message?.parts ?? []) {
    if (part.content?.$case !== 'data' || !isRecord(part.content.value)) continue
    const asked = part.content.value.approvalRequest
    if (!isRecord(asked)) continue
    const read = decodeIdentified(asked)
    return read.ok ? read.value : undefined
  }
  return undefined
}

/**
 * The broker's request for a worker's: the call's arguments are rebuilt from its subject
 * as the worker's rules read it (a command, a path, the arguments' JSON), so the parent's
 * rules match the same subject.
 */
export function approvalAsk(asked: WorkerApproval, childId: string, scope: A2aApprovalScope, signal: AbortSignal): ApprovalAsk {
  return {
    agent: scope.parent,
    tool: asked.tool,
    args: argsOf(asked),
    signal,
    remote: { child: childId, name: scope.name, below: asked.below, record: false, ...(asked.policy === 'ask' && { verdict: 'ask' as const }), ...(scope.levels !== undefined && { levels: scope.levels }) },
    // A read-only call asked up for this side's PreToolUse hooks: only they decide it.
    ...(asked.sideEffect === false && { sideEffect: false as const }),
  }
}

function argsOf(asked: WorkerApproval): unknown {
  switch (asked.kind) {
    case 'execute':
      return { command: asked.subject }
    case 'edit':
      return { path: asked.subject }
    default:
      try {
        const parsed: unknown = JSON.parse(asked.subject)
        if (isRecord(parsed)) return parsed
      } catch {
        // Not the JSON of an object (shortened, or another kind of subject): kept as it is.
      }
      return { subject: asked.subject }
  }
}

/** The answer to `asked` on the worker's task: the decision, and who decided it. */
export function answerMessage(asked: WorkerApproval, decision: PermissionDecision, taskId: string, contextId: string): Message {
  const answer = { approval: asked.id, decision: decision.decision, ...(decision.decision === 'reject' && { reason: decision.reason }) }
  return {
    messageId: randomUUID(),
    contextId,
    taskId,
    role: a2aSdk().Role.ROLE_USER,
    parts: [{ content: { $case: 'data', value: answer }, metadata: undefined, filename: '', mediaType: 'application/json' }],
    metadata: provenanceMeta(decision),
    extensions: [],
    referenceTaskIds: [],
  }
}
