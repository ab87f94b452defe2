// The face of the queue provider: the plugin (a composition names the package), what
// `dsh worker` reads its options with, and the wire and signing `@dsh/queue-worker` runs
// jobs by (and its tests enqueue with). The rest stays inside; the package's tests import
// it from its files.
export { QueuePlugin as default, QueuePlugin } from './plugin.js'
export { QUEUE_NAME } from './config.js'
export { cancelChannel } from './client.js'
export { describeRedis, pingRedis, readRedisUrl, redisClient } from './redis.js'
export { ABORTED_PREFIX } from './transport.js'
export { jobSignature, jobSignatureProblem, readQueueKey, type QueueKey } from './signing.js'
export { JOB_NAME, jobPayload, MCP_JOB_VERSION, readJobPayload, takenLogLine, WIRE_VERSION, type JobHelper, type JobProgress, type JobResult } from './wire.js'
