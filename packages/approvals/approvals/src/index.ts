/** The public face of the approval broker; the README documents every name here. */
export { ApprovalService, ApprovalService as default } from './service.js'
export { agentName, delegationName, type DefaultDecision, type TreeDefault } from './lineage.js'
export { policyVerdict, levelVerdict, compileLevel, type PolicyVerdict, type PolicyCall, type Verdict } from './rules.js'
export { commandSegments, displaySubject, subjectOf, MAX_SUBJECT_CHARS, type ApprovalKind, type CallSubject, type CommandSegment } from './subject.js'
export { ApprovalError, type ApprovalErrorCode } from './errors.js'
export type { ApprovalVerdictSource, SourceVerdict } from './sources.js'
export type { ApprovalAsk, ApprovalFrontEnd, ApprovalRecorder, ApprovalRequestInfo, ApprovalSettledInfo, FrontEndAnswer, RemoteAsker } from './types.js'
export {
  ANSWER_DECISIONS,
  decodeForwarded,
  decodeIdentified,
  decodeProvenance,
  encodeForwarded,
  encodeProvenance,
  isAnswerDecision,
  parsePermissionPolicy,
  PERMISSION_POLICIES,
  provenanceFields,
  provenanceMeta,
  TOOL_NAME,
  type AnswerDecision,
  type DecisionProvenance,
  type ForwardedApproval,
  type IdentifiedApproval,
  type PermissionPolicy,
  type WireRead,
} from './wire.js'
