import Schema from 'schemastery'
import { SubagentError, type DescendantEvent } from '@dsh/subagent'
import { describeRedis, readRedisUrl } from './redis.js'
import { readQueueKey, type QueueKey } from './signing.js'

/** The plugin's config, as written in a composition file. The Redis URL itself never appears here. */
export interface QueueProviderConfig {
  providerName: string
  queue: string
  redisUrlEnv: string
  /** The environment variable holding the queue's signing key; unset, jobs go unsigned. The key itself never appears here. */
  keyEnv?: string
  attempts: number
  timeoutMs?: number
  /** How long finished jobs stay in Redis, so a resumed parent can still collect them. */
  keepFinishedMs: number
}

const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/
/** BullMQ builds Redis keys from the queue name: no `:` (its key separator), nothing odd. */
export const QUEUE_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$/

export const QueueProviderConfig: Schema<QueueProviderConfig> = Schema.object({
  providerName: Schema.string().min(1).default('queue').description('The name the provider registers under on ctx.subagents.'),
  queue: Schema.string().pattern(QUEUE_NAME).default('dsh').description('The BullMQ queue delegations go to; `dsh worker --queue NAME` takes them.'),
  redisUrlEnv: Schema.string().pattern(ENV_NAME).default('DSH_REDIS_URL').description('The environment variable holding the Redis URL (redis://[user:password@]host:port[/db], rediss://…, or unix:///path/to/socket), never the URL itself.'),
  keyEnv: Schema.string().pattern(ENV_NAME).description('The environment variable holding the queue\'s signing key (the same on every `dsh worker --key-env`), never the key itself: each job is signed, and a worker with the key runs only signed jobs. Unset, jobs are unsigned and a worker trusts whoever can write to the Redis.'),
  attempts: Schema.natural().min(1).max(20).default(3).description('How many workers may try a delegation before it ends error (a worker that dies mid-job hands it to the next).'),
  timeoutMs: Schema.natural().min(1).description('Longest a delegation may take from its enqueueing; on expiry it ends error and its worker is told to stop.'),
  keepFinishedMs: Schema.natural().min(1000).default(24 * 3600_000).description('How long a finished job stays in Redis for a resumed parent to collect.'),
}) as Schema<QueueProviderConfig>

/** Everything a run needs, defaults applied and the URL read once. */
export interface QueueRunSpec {
  provider: string
  queue: string
  redisUrl: string
  /** The URL as messages show it: host and port or socket, never the password. */
  redisShown: string
  /** The key jobs are signed with (`keyEnv`); none, unsigned. */
  key?: QueueKey
  attempts: number
  timeoutMs: number | undefined
  keepFinishedMs: number
  progressDropped?: (reason: string) => void
  /** The plugin's: told of the descendants a worker names in the job's progress with the child they came through; emitted as `subagent/descendant`. */
  descendantBelow?: (info: DescendantEvent) => void
}

/** The one place config meets the environment: an unset or malformed URL fails the load, naming the variable. */
export function resolveQueueSpec(config: QueueProviderConfig, env: NodeJS.ProcessEnv = process.env): QueueRunSpec {
  let redisUrl: string
  let key: QueueKey | undefined
  try {
    redisUrl = readRedisUrl(config.redisUrlEnv, env)
    // Named but unset is refused rather than run unsigned: a worker holding the key would refuse every job.
    if (config.keyEnv !== undefined) key = readQueueKey(config.keyEnv, env)
  } catch (error) {
    throw new SubagentError('INVALID_CONFIG', `subagent-queue: ${error instanceof Error ? error.message : String(error)}`)
  }
  return {
    provider: config.providerName,
    queue: config.queue,
    redisUrl,
    redisShown: describeRedis(redisUrl),
    ...(key !== undefined && { key }),
    attempts: config.attempts,
    timeoutMs: config.timeoutMs,
    keepFinishedMs: config.keepFinishedMs,
  }
}
