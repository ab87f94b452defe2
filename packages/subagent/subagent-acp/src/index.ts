// The provider and its config; the wire is `connection.ts` (connecting) and `turn.ts` (one turn).
export { AcpPlugin, AcpProvider, ACP_CAPABILITIES } from './plugin.js'
export { AcpPlugin as default } from './plugin.js'
export type { DescendantEvent, ReportedDescendant } from './descendant.js'
export { AcpProviderConfig, resolveAcpSpec, withRecordingGrant, RECORDING_DIR_ENV, type AcpRunSpec } from './config.js'
// The rules, exported for their tests.
export { answerPermission, REFUSED_BY_APPROVAL, type PermissionPolicy } from './permission.js'
export { StdoutGuard } from './stdout-guard.js'
