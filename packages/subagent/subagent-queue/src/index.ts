export { QueuePlugin as default, QueuePlugin, QueueProvider, QUEUE_CAPABILITIES } from './plugin.js'
export { QueueProviderConfig, QUEUE_NAME, resolveQueueSpec, type QueueRunSpec } from './config.js'
export { cancelChannel } from './client.js'
export { describeRedis, pingRedis, readRedisUrl, redisClient, redisFailure, CONNECT_TIMEOUT_MS } from './redis.js'
export { ABORTED_PREFIX, jobIdOf } from './transport.js'
export { canonicalJson, jobSignature, jobSignatureProblem, MIN_QUEUE_KEY_CHARS, readQueueKey, QueueKey } from './signing.js'
export {
  HELPER_JOB_VERSION,
  JOB_NAME,
  MAX_OUTPUT_CHARS,
  MAX_PERSONA_CHARS,
  MAX_PROMPT_CHARS,
  MAX_TOOL_NAMES,
  WIRE_VERSION,
  holdersOf,
  jobHelperOf,
  jobPayload,
  readJobPayload,
  readJobProgress,
  readJobResult,
  readUsage,
  takenLogLine,
  type JobHelper,
  type JobPayload,
  type JobProgress,
  type JobResult,
} from './wire.js'
