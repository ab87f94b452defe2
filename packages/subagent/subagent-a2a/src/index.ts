// The provider and its config; the wire is `child.ts` (a run's hold on a worker), `worker.ts` (reaching a worker) and `turn.ts` (one run).
export { A2aPlugin, A2aProvider, A2A_CAPABILITIES } from './plugin.js'
export { A2aPlugin as default } from './plugin.js'
export { A2aProviderConfig, resolveA2aSpec, type A2aRunSpec } from './config.js'
export { ANSWER_ARTIFACT, SILENT_PERIODS } from './turn.js'
export { CANCEL_GRACE_MS, CONNECT_TIMEOUT_MS, KEEPALIVE_EXTENSION } from './child.js'
export { CONTEXTS_EXTENSION } from './worker.js'
export { UNREACHABLE_SKIP_MS } from './worker-pool.js'
