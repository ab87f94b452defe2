// The face of `dsh a2a serve`: what the CLI and the testkit serve with. The parts (the
// executor, the request handler, the task store, contexts, webhooks, the approval wire)
// stay inside; the package's tests import them from their files.
export { serveA2a, KEEPALIVE_INTERVAL_MS, type A2aServer, type A2aServerOptions } from './server.js'
export { A2aServerError } from './errors.js'
export type { A2aTaskEvent } from './executor.js'
export type { PermissionPolicy } from './approvals.js'
