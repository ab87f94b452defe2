// The provider and its config; the wire is `child.ts` (the process), `app-server.ts` (connecting) and `turn.ts` (one turn).
export { CodexPlugin, CodexProvider, type CodexHooks } from './plugin.js'
export { CodexPlugin as default } from './plugin.js'
export { CodexConfig, resolveRunSpec, type CodexRunSpec } from './config.js'
export { codexCommand, missingCodexPackage, type CodexCommand } from './codex-binary.js'
export { PERMISSION_MODES, type PermissionMode } from './approvals.js'
