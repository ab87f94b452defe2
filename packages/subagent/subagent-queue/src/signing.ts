/**
 * Signed jobs. A job's lineage carries the rules and the budget its child runs under, so
 * whoever writes a job decides what a worker's child may do. Unsigned, that is anyone who
 * can write to the Redis. With a queue key (the same secret in a named environment
 * variable on the parent and on every worker), the parent signs each job with an HMAC
 * (SHA-256) over the whole of it, and a worker that holds the key runs only jobs whose
 * signature it can recompute: a job written by anyone else, or changed after signing (a
 * rule removed, a budget raised, the prompt swapped, moved to another queue or job id),
 * fails before anything runs.
 *
 * What is signed is a canonical encoding of `{ queue, jobId, payload }`: JSON with every
 * object's keys in sorted order, so both ends compute the same bytes whatever order the
 * fields were written or stored in. The key never leaves the variable: not in config,
 * jobs, messages or sessions.
 */
import { createHmac, timingSafeEqual } from 'node:crypto'
import { isRecord } from '@dsh/base'

/** Shortest key accepted, in characters (a 128-bit secret written as hex). */
const MIN_QUEUE_KEY_CHARS = 32
/** How a signature is written in a job's data (`sig`): the algorithm, then the MAC in hex. */
const SIGNATURE = /^hmac-sha256:([0-9a-f]{64})$/

/**
 * A queue's signing key, and the variable it came from (which messages name). The secret
 * is a private field, so no log line, inspection or JSON of a spec that holds it shows it.
 */
export class QueueKey {
  readonly #secret: Buffer

  constructor(
    readonly variable: string,
    secret: string,
  ) {
    this.#secret = Buffer.from(secret, 'utf8')
  }

  /** The HMAC-SHA256 of `text` under this key. */
  mac(text: string): Buffer {
    return createHmac('sha256', this.#secret).update(text).digest()
  }
}

/** The key in the variable `name`; throws a one-line reason naming the variable, never showing its value. */
export function readQueueKey(name: string, env: NodeJS.ProcessEnv = process.env): QueueKey {
  const value = env[name]
  if (!value) throw new Error(`${name} is not set (or empty); export the queue's signing key in it, the same on the parent and every worker (at least ${MIN_QUEUE_KEY_CHARS} characters, e.g. from \`openssl rand -hex 32\`)`)
  if (value.length < MIN_QUEUE_KEY_CHARS) throw new Error(`${name} holds a key of ${value.length} characters; a queue signing key needs at least ${MIN_QUEUE_KEY_CHARS} (e.g. from \`openssl rand -hex 32\`)`)
  return new QueueKey(name, value)
}

/**
 * `value` as canonical JSON: object keys sorted, keys whose value is `undefined` left out
 * and `undefined` in arrays written `null` (as `JSON.stringify` stores them), so the bytes
 * a parent signs are the bytes a worker recomputes from what Redis gave it.
 */
export function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map((item) => (item === undefined ? 'null' : canonicalJson(item))).join(',')}]`
  if (isRecord(value)) {
    const keys = Object.keys(value).filter((key) => value[key] !== undefined).sort()
    return `{${keys.map((key) => `${JSON.stringify(key)}:${canonicalJson(value[key])}`).join(',')}}`
  }
  return JSON.stringify(value) ?? 'null'
}

function mac(key: QueueKey, queue: string, jobId: string, payload: Record<string, unknown>): Buffer {
  return key.mac(canonicalJson({ queue, jobId, payload }))
}

/** The signature of a job's data (without its `sig`) for job `jobId` of `queue`. */
export function jobSignature(key: QueueKey, queue: string, jobId: string, payload: Record<string, unknown>): string {
  return `hmac-sha256:${mac(key, queue, jobId, payload).toString('hex')}`
}

/**
 * Why the job data `data` of job `jobId` on `queue` is not signed with `key`, or
 * `undefined` when it is. The comparison takes the same time wherever the signatures
 * differ. Each reason is a sentence the delegating parent reads as the job's failure.
 */
export function jobSignatureProblem(key: QueueKey, queue: string, jobId: string, data: unknown): string | undefined {
  const expectation = `this worker runs only jobs signed with the queue key in ${key.variable}`
  if (!isRecord(data) || data.sig === undefined) return `the job is not signed, and ${expectation}: give the parent's queue provider the same key (keyEnv: ${key.variable}); nothing ran`
  const written = typeof data.sig === 'string' ? SIGNATURE.exec(data.sig) : null
  if (!written) return `the job's signature is not an hmac-sha256 signature, and ${expectation}; nothing ran`
  const { sig: _sig, ...payload } = data
  let expected: Buffer
  try {
    expected = mac(key, queue, jobId, payload)
  } catch {
    // Nested past what the encoder can walk: no parent of ours wrote it.
    return `the job's data cannot be encoded to check its signature; nothing ran`
  }
  const given = Buffer.from(written[1]!, 'hex')
  if (given.length !== expected.length || !timingSafeEqual(given, expected)) {
    return `the job's signature does not match its contents (it was signed with another key, or changed after it was signed: its lineage, rules, budget, prompt, helper, queue or id), and ${expectation}; nothing ran`
  }
  return undefined
}
