// The provider and its config; the wire is `child.ts` (the process), `app-server.ts` (connecting) and `turn.ts` (one turn).
export { CodexPlugin, CodexProvider } from './plugin.js'
export { CodexPlugin as default } from './plugin.js'
export { CodexConfig, resolveRunSpec } from './config.js'
// Whether the optional Codex package is installed (dsh demo asks).
export { missingCodexPackage } from './codex-binary.js'
