/**
 * The public face of the subagent seam; the README documents every name here.
 */
// The service and its vocabulary.
export { SubagentService, DEFAULT_PROGRESS_INTERVAL_MS, type SubagentQueuedInfo } from './service.js'
export type { BudgetEvent, BudgetLimit, TreeBudget, TreeLimitsConfig } from './tree-limits.js'
export { SubagentService as default } from './service.js'
export {
  NO_CAPABILITIES,
  type ChildBudget,
  type ProgressSink,
  type StopReason,
  type SubagentCapabilities,
  type SubagentFeature,
  type SubagentProgress,
  type SubagentProgressInfo,
  type SubagentProvider,
  type SubagentRequest,
  type SubagentResult,
  type SubagentRun,
  type SubagentRunEndInfo,
  type SubagentRunInfo,
  type SubagentUsage,
  type SubagentWorkspaceReport,
} from './types.js'
export { SubagentError, type SubagentErrorCode } from './errors.js'
export { mcpServerLookup, requiredMcpServers, type McpServerLookup, type ResolvedMcpServer } from './mcp-servers.js'
export { outputText, selectOutput } from './output.js'
export { wrapRun, type RunWrap } from './run-wrap.js'

// Admission and the lineage that crosses every boundary.
export { admitDepth, DEFAULT_MAX_DEPTH, effectiveMaxDepth, firstUnsupportedFeature, refuseDisposedParent, tighterBound, type DepthWords, type RequestedFeatures } from './admission.js'
export { A2A_LINEAGE, ACP_LINEAGE, QUEUE_LINEAGE, lineageHeader, lineageOf, readTraceContext, readTraceparent, setTraceContextSource, traceContextOf, traceEnvironment, type TraceContext, type TraceContextSource, type Lineage, type LineageField, type LineageWarnings, type LineageWire, type ReceivedLineage } from './lineage.js'

// The served side: one line for every host that runs a delegation it received.
export { admitDelegation, openDelegation, runDelegation, serveDelegation, RecordingRefused, type AdmittedDelegation, type OpenDelegationOptions, type RunDelegationOptions, type ServeDelegationOptions, type ServedHost, type ServedRun } from './served.js'

// The one in-process child factory.
export { createInProcessChild, createInProcessChildAnd, type InProcessChildOptions, type InProcessChildRequest } from './in-process-child.js'

// Continuable children.
export {
  DESCRIPTOR_VERSION,
  type ContinuableChildInfo,
  type ContinuableChildState,
  type ContinuableDescriptor,
  type ContinuablePreparation,
  type ContinuableRequest,
  type ContinuableStarted,
  type InterruptAuthority,
  type PrepareContinuableRequest,
  type RemoteChildRecord,
  type RemoteConversation,
  type StartContinuableOptions,
} from './continuable/types.js'
export type { ContinuableSetup } from './continuable/manager.js'
export { makeDescriptor, parseDescriptor } from './continuable/descriptor.js'

// The one remote lifecycle.
export * from './remote/index.js'

// Live progress: the shapes consumers render.
export { addUsage, noUsage } from './progress/local.js'
export { compactArgs, displayLine, summariseArgs } from './progress/shape.js'
export { columnWidth, padColumns, truncateColumns } from './progress/columns.js'
