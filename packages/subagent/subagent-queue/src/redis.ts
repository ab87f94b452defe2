/**
 * Reaching Redis: the URL comes from a named environment variable (never a file, never a
 * log line: it may hold a password), and is shown without its credentials. Parents and
 * workers connect the same way, so one variable set on every host is the whole set-up.
 */
import { createRequire } from 'node:module'
import type { Redis, RedisOptions } from 'ioredis'

/**
 * ioredis, required on first use rather than when this file loads: it is kept outside dsh's
 * bundle and read from disk without a code cache, and a composition that never delegates
 * through the queue never makes a client (with BullMQ, about 100 ms of such a `dsh run`).
 */
let ioredis: typeof import('ioredis') | undefined
function loadIoredis(): typeof import('ioredis') {
  // From this package, as a static import would resolve it (the require is made here too:
  // in the bundle, finding this package's place is itself a look-up).
  ioredis ??= createRequire(import.meta.url)('ioredis') as typeof import('ioredis')
  return ioredis
}

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
  const { Redis: RedisClient } = loadIoredis()
  const client = parsed.protocol === 'unix:' ? new RedisClient({ ...common, path: parsed.pathname }) : new RedisClient(url, common)
  // A connection error reaches whoever needs Redis through the command that fails (or the
  // bounded wait for readiness); unhandled, ioredis would print every reconnection attempt.
  // The last one is kept: the failing command says only how often ioredis retried.
  client.on('error', (error: Error) => lastErrors.set(client, error))
  return client
}

/** Each client's last connection error (`redisFailure` names it instead of ioredis's retry count). */
const lastErrors = new WeakMap<Redis, Error>()

/** What a connection error's code means, for a person. */
const CAUSES: Record<string, string> = {
  ECONNREFUSED: 'connection refused',
  ENOENT: 'no socket at that path',
  EACCES: 'permission denied',
  ECONNRESET: 'the connection was reset',
  ETIMEDOUT: 'the connection timed out',
  ENOTFOUND: 'the host name does not resolve',
  EAI_AGAIN: 'the host name does not resolve',
  EHOSTUNREACH: 'the host is unreachable',
  ENETUNREACH: 'the network is unreachable',
}

/**
 * Why Redis at `url` could not be used, in one line: the connection's own error (the last
 * one `clients` saw, else `error`'s), said in words with the raw reason after it
 * (`connection refused (connect ECONNREFUSED 127.0.0.1:6379)`), never ioredis's advice about
 * `maxRetriesPerRequest`; any password the URL holds is blanked out of it.
 */
export function redisFailure(url: string, error: unknown, clients: readonly Redis[] = []): string {
  const seen = clients.map((client) => lastErrors.get(client)).find((found) => found !== undefined)
  const cause = seen ?? error
  const raw = (cause instanceof Error ? cause.message : String(cause)).replace(/\s*\n\s*/g, ' ')
  const code = cause instanceof Error && typeof (cause as NodeJS.ErrnoException).code === 'string' ? (cause as NodeJS.ErrnoException).code! : ''
  let words = CAUSES[code]
  if (words === undefined && raw.startsWith('NOAUTH')) words = 'Redis asks for a password the URL does not give'
  if (words === undefined && raw.startsWith('WRONGPASS')) words = "Redis refused the URL's user or password"
  if (words === undefined && seen === undefined && /maxRetriesPerRequest/.test(raw)) words = 'no connection'
  return hidePassword(url, words === undefined ? raw : `${words} (${raw})`)
}

/** `text` with the URL's password (and user), if it has one, blanked out. */
function hidePassword(url: string, text: string): string {
  let parsed: URL
  try {
    parsed = new URL(url)
  } catch {
    return text
  }
  let hidden = text
  for (const secret of [parsed.password, decodeURIComponent(parsed.password)]) if (secret.length >= 3) hidden = hidden.split(secret).join('***')
  return hidden
}

/**
 * Whether Redis answers at `url`: one PING within `CONNECT_TIMEOUT_MS`, on a client of its
 * own that is closed after. Rejects with the reason in one line (`redisFailure`): the
 * connection's own error (`connection refused (connect ECONNREFUSED …)`, `NOAUTH …`) rather
 * than the client's count of retries. `dsh worker` asks it before it takes jobs, since its blocking
 * connections would wait for an absent Redis, or one that refuses them, forever.
 */
export async function pingRedis(url: string): Promise<void> {
  // A socket that never connected may never say it closed: ioredis would then hold the
  // process for its disconnect timeout (2 s) before cutting it, delaying a refusal's exit.
  const client = redisClient(url, false, { disconnectTimeout: 50 })
  let timer: NodeJS.Timeout | undefined
  const timeout = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`no answer within ${CONNECT_TIMEOUT_MS} ms`)), CONNECT_TIMEOUT_MS)))
  try {
    await Promise.race([client.ping(), timeout])
  } catch (error) {
    throw new Error(redisFailure(url, error, [client]), { cause: error })
  } finally {
    clearTimeout(timer)
    client.disconnect()
  }
}
