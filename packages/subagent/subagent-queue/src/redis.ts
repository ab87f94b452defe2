/**
 * Reaching Redis: the URL comes from a named environment variable (never a file, never a
 * log line: it may hold a password), and is shown without its credentials. Parents and
 * workers connect the same way, so one variable set on every host is the whole set-up.
 */
import { Redis, type RedisOptions } from 'ioredis'

/** How long a connection attempt may take before Redis counts as unreachable. */
export const CONNECT_TIMEOUT_MS = 5_000

/** The URL in `name`, checked: `redis://`, `rediss://` or `unix://`. Throws a one-line reason naming the variable. */
export function readRedisUrl(name: string, env: NodeJS.ProcessEnv = process.env): string {
  const url = env[name]
  if (!url) throw new Error(`${name} is not set (or empty); export the Redis URL in it (redis://host:6379, or unix:///path/to/redis.sock)`)
  let parsed: URL
  try {
    parsed = new URL(url)
  } catch {
    throw new Error(`${name} does not hold a URL; write it like redis://host:6379 or unix:///path/to/redis.sock`)
  }
  if (!['redis:', 'rediss:', 'unix:'].includes(parsed.protocol)) throw new Error(`${name} holds a ${parsed.protocol} URL; Redis is reached by redis://, rediss:// or unix://`)
  if (parsed.protocol === 'unix:' && !parsed.pathname.startsWith('/')) throw new Error(`${name} holds a unix:// URL without an absolute socket path`)
  return url
}

/** The URL without user or password, for messages. */
export function describeRedis(url: string): string {
  const parsed = new URL(url)
  return parsed.protocol === 'unix:' ? `unix://${parsed.pathname}` : `${parsed.protocol}//${parsed.host}${parsed.pathname === '/' ? '' : parsed.pathname}`
}

/**
 * A new client. `blocking` clients (workers, queue events) retry a command for as long as
 * Redis is away (BullMQ requires it); the others give a command up after one failed
 * reconnection, so a delegation made while Redis is away says so instead of hanging.
 */
export function redisClient(url: string, blocking: boolean, more: RedisOptions = {}): Redis {
  const parsed = new URL(url)
  const common: RedisOptions = {
    ...more,
    connectTimeout: CONNECT_TIMEOUT_MS,
    maxRetriesPerRequest: blocking ? null : 1,
    lazyConnect: false,
    // Reconnect with a short, bounded backoff: a restarted Redis is picked up again.
    retryStrategy: (times) => Math.min(100 * times, 2_000),
  }
  const client = parsed.protocol === 'unix:' ? new Redis({ ...common, path: parsed.pathname }) : new Redis(url, common)
  // A connection error reaches whoever needs Redis through the command that fails (or the
  // bounded wait for readiness); unhandled, ioredis would print every reconnection attempt.
  client.on('error', () => {})
  return client
}

/**
 * Whether Redis answers at `url`: one PING within `CONNECT_TIMEOUT_MS`, on a client of its
 * own that is closed after. Rejects with the reason in one line: the connection's own
 * error (`NOAUTH Authentication required.`, `connect ECONNREFUSED …`) rather than the
 * client's count of retries. `dsh worker` asks it before it takes jobs, since its blocking
 * connections would wait for an absent Redis, or one that refuses them, forever.
 */
export async function pingRedis(url: string): Promise<void> {
  // A socket that never connected may never say it closed: ioredis would then hold the
  // process for its disconnect timeout (2 s) before cutting it, delaying a refusal's exit.
  const client = redisClient(url, false, { disconnectTimeout: 50 })
  let lastError: string | undefined
  client.on('error', (error: Error) => (lastError = error.message))
  let timer: NodeJS.Timeout | undefined
  const timeout = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`no answer within ${CONNECT_TIMEOUT_MS} ms`)), CONNECT_TIMEOUT_MS)))
  try {
    await Promise.race([client.ping(), timeout])
  } catch (error) {
    throw new Error(lastError ?? (error instanceof Error ? error.message : String(error)), { cause: error })
  } finally {
    clearTimeout(timer)
    client.disconnect()
  }
}
