/** A request as front-ends and listeners see it (`ApprovalRequestInfo`), from what the broker was asked. */
import { agentName } from './lineage.js'
import type { PolicyVerdict } from './rules.js'
import { displaySubject, shownSubject, type CallSubject } from './subject.js'
import type { ApprovalAsk, ApprovalRequestInfo } from './types.js'

/** The most of a subject a front-end is shown (`ApprovalRequestInfo.subject`). */
const FRONT_END_SUBJECT_CHARS = 16_384

export function describeRequest(ask: ApprovalAsk, subject: CallSubject, policy: PolicyVerdict, id: string, now: number, expiresAt: number): ApprovalRequestInfo {
  const chain: string[] = []
  const path: string[] = []
  for (const agent of [ask.agent, ...ask.agent.ancestors()]) {
    chain.unshift(agent.id)
    path.unshift(agentName(agent))
  }
  let child: string | undefined
  if (ask.remote) {
    child = ask.remote.child
    chain.push(child)
    path.push(ask.remote.name, ...(ask.remote.below ?? []))
  }
  const info: ApprovalRequestInfo = {
    id,
    path,
    chain,
    agentId: ask.agent.id,
    ...(child !== undefined && { child }),
    tool: ask.tool,
    // A front-end is shown at most this much; rules saw it all (or, cut, allowed none of it).
    subject: shownSubject(subject, FRONT_END_SUBJECT_CHARS),
    display: displaySubject(subject.text),
    kind: subject.kind,
    args: ask.args,
    ...(ask.callId !== undefined && { callId: ask.callId }),
    policy: policy.verdict === 'ask' ? 'ask' : 'none',
    ...(policy.verdict === 'ask' && policy.rule !== undefined && { rule: policy.rule }),
    ...(ask.sideEffect === false && { sideEffect: false as const }),
    startedAt: now,
    expiresAt,
  }
  return info
}
