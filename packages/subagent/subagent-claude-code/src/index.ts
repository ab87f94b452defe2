// The provider and its settings; the wire is `child.ts` (one query's process), `session.ts` (connecting) and `turn.ts` (one turn).
export { ClaudeCodePlugin, ClaudeCodeProvider } from './plugin.js'
export { ClaudeCodePlugin as default } from './plugin.js'
export type { PermissionModeSetting } from './run-spec.js'
export type { ClaudeCodeRun } from './session.js'
// Whether the optional Agent SDK is installed (dsh demo asks), and the rules, exported for their tests.
export { claudeCodeEnvironment } from './claude-code-environment.js'
export { missingClaudeCodePackage, platformPackages, resolveClaudeExecutable } from './executable.js'
export { resultOf, type Denial } from './outcome.js'
export { brokerCall } from './approvals.js'
export { ClaudeCodeProgressReader, usageOfResult } from './progress.js'
