/**
 * The workers of one provider: which is least busy, which stopped answering. A worker
 * that did not answer is skipped for `UNREACHABLE_SKIP_MS`; when every worker is marked,
 * the one marked longest ago is tried again rather than failing without a try.
 */
import type { Client } from '@a2a-js/sdk/client'
import { loadA2aSdk } from './sdk.js'

/** How long a worker that did not answer is left out of the choice. */
const UNREACHABLE_SKIP_MS = 30_000

export class Worker {
  /** Runs holding this worker now. */
  active = 0
  /** When it last failed to answer; `undefined` while it answers. */
  unreachableSince: number | undefined
  private client: Promise<Client> | undefined

  constructor(
    readonly url: string,
    private readonly fetchImpl: typeof fetch,
  ) {}

  /**
   * The SDK client from the worker's agent card, fetched once and again after a failure.
   * With the SDK's compatibility layer on, a worker whose card offers JSON-RPC only in
   * protocol 0.3 (its card in the 0.3 shape, or a 1.0 card listing a 0.3 interface alone)
   * is spoken to in 0.3; one that offers 1.0 is spoken to in 1.0.
   */
  connect(): Promise<Client> {
    this.client ??= loadA2aSdk().then(({ client }) =>
      new client.ClientFactory({
        transports: [new client.JsonRpcTransportFactory({ fetchImpl: this.fetchImpl, legacyCompat: { enabled: true } })],
        cardResolver: new client.DefaultAgentCardResolver({ fetchImpl: this.fetchImpl, legacyCompat: { enabled: true } }),
      }).createFromUrl(this.url),
    )
    this.client.catch(() => {
      this.client = undefined
    })
    return this.client
  }

  markUnreachable(): void {
    this.unreachableSince = Date.now()
    this.client = undefined
  }

  markAnswering(): void {
    this.unreachableSince = undefined
  }
}

export class WorkerPool {
  readonly workers: readonly Worker[]
  private turn = 0

  constructor(urls: readonly string[], token: string | undefined) {
    this.workers = urls.map((url) => new Worker(url, refusingUnauthorized(token === undefined ? fetch : withBearer(token, new URL(url).origin))))
  }

  /** The least busy answering worker (ties in turn); it counts the run until `release`. */
  acquire(now = Date.now()): Worker {
    const answering = this.workers.filter((worker) => worker.unreachableSince === undefined || now - worker.unreachableSince >= UNREACHABLE_SKIP_MS)
    const candidates = answering.length > 0 ? answering : [...this.workers].sort((a, b) => a.unreachableSince! - b.unreachableSince!).slice(0, 1)
    const start = this.turn++ % candidates.length
    let best = candidates[start]!
    for (let offset = 1; offset < candidates.length; offset++) {
      const worker = candidates[(start + offset) % candidates.length]!
      if (worker.active < best.active) best = worker
    }
    best.active++
    return best
  }

  /** Count a run on a worker chosen earlier (a continuable child stays on the worker that holds its context). */
  hold(worker: Worker): void {
    worker.active++
  }

  /** The configured worker at `url`, if it is one. */
  byUrl(url: string): Worker | undefined {
    return this.workers.find((worker) => worker.url === url)
  }

  release(worker: Worker): void {
    worker.active = Math.max(0, worker.active - 1)
  }
}

/**
 * `fetch` that adds `Authorization: Bearer <token>` to every request for the worker's own
 * origin (its card and its calls) and to nothing else: a card that names an endpoint on
 * another host does not get it sent there (the request goes out without it and that host
 * refuses it, which the run reports). Redirects to another origin drop it too (fetch's rule).
 */
function withBearer(token: string, origin: string): typeof fetch {
  return (input, init) => {
    const url = input instanceof Request ? input.url : String(input)
    if (new URL(url).origin !== origin) return fetch(input, init)
    const headers = new Headers(init?.headers ?? (input instanceof Request ? input.headers : undefined))
    headers.set('Authorization', `Bearer ${token}`)
    return fetch(input, { ...init, headers })
  }
}

/** The most of a 401's body read for its reason. */
const REFUSAL_BODY_BYTES = 4096
/** The most of that reason repeated in the run's diagnostic. */
const REFUSAL_DETAIL_CHARS = 300

/**
 * A 401 answer, read off the HTTP status by the provider's own fetch. The SDK's client
 * reads a refusal's body for a JSON-RPC error and reports one it cannot read (a worker that
 * answers `{"error": "…"}`, or nothing) as "An unexpected error occurred.", losing the
 * status; this keeps it, so the run says the token was refused whatever the worker's body.
 */
export class TokenRefused extends Error {
  constructor(
    readonly url: string,
    readonly detail: string,
  ) {
    super(`401 Unauthorized from ${url}${detail ? `: ${detail}` : ''}`)
    this.name = 'TokenRefused'
  }
}

/** Whether `error`, or one of its causes, is a `TokenRefused`. */
export function isTokenRefused(error: unknown): boolean {
  for (let current: unknown = error, depth = 0; current instanceof Error && depth < 5; current = current.cause, depth++) {
    if (current instanceof TokenRefused) return true
  }
  return false
}

/** `fetch` that turns a 401 answer into `TokenRefused`, with what its body says (bounded). */
function refusingUnauthorized(inner: typeof fetch): typeof fetch {
  return async (input, init) => {
    const response = await inner(input, init)
    if (response.status !== 401) return response
    const url = input instanceof Request ? input.url : String(input)
    throw new TokenRefused(url.split('?', 1)[0]!, reasonOf(await headOf(response)))
  }
}

/** The first `REFUSAL_BODY_BYTES` of a body, as text; the rest is not read. */
async function headOf(response: Response): Promise<string> {
  const reader = response.body?.getReader()
  if (!reader) return ''
  const chunks: Uint8Array[] = []
  let size = 0
  try {
    while (size < REFUSAL_BODY_BYTES) {
      const { done, value } = await reader.read()
      if (done) break
      chunks.push(value)
      size += value.length
    }
  } catch {
    // A body cut short says what it said so far.
  } finally {
    void reader.cancel().catch(() => undefined)
  }
  return Buffer.concat(chunks).subarray(0, REFUSAL_BODY_BYTES).toString('utf8')
}

/** A refusal body's reason: a JSON-RPC error's message, an `error` string or object's message, else the text; one line, bounded. */
function reasonOf(body: string): string {
  let reason = body
  try {
    const parsed = JSON.parse(body) as { error?: unknown; message?: unknown }
    const error = parsed.error
    if (typeof error === 'string') reason = error
    else if (typeof error === 'object' && error !== null && typeof (error as { message?: unknown }).message === 'string') reason = (error as { message: string }).message
    else if (typeof parsed.message === 'string') reason = parsed.message
  } catch {
    // Not JSON: the text itself.
  }
  // eslint-disable-next-line no-control-regex -- a worker's bytes must not drive the parent's terminal
  const line = reason.replace(/[\s\u0000-\u001f\u007f-\u009f]+/g, ' ').trim()
  return line.length > REFUSAL_DETAIL_CHARS ? `${line.slice(0, REFUSAL_DETAIL_CHARS)}…` : line
}
