// The provider and its config; the wire is `child.ts` (a run's hold on a worker), `worker.ts` (reaching a worker) and `turn.ts` (one run).
export { A2aPlugin, A2aProvider } from './plugin.js'
export { A2aPlugin as default } from './plugin.js'
export { A2aProviderConfig, resolveA2aSpec } from './config.js'
export { SILENT_PERIODS } from './turn.js'
export { CONTEXTS_EXTENSION } from './worker.js'
