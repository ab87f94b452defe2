/**
 * Push notifications: the protocol's push-notification config methods are the SDK's
 * (`DefaultRequestHandler`: Create, Get, List, Delete, and a config sent with a message),
 * over this server's store and sender:
 *
 * - `WebhookStore` (the SDK's `PushNotificationStore`): a config is stored only when the
 *   `WebhookPolicy` (`webhook-policy.ts`) allows its URL, else the client gets
 *   `RequestMalformedError` naming why and nothing is stored. At most
 *   `MAX_WEBHOOKS_PER_TASK` configs per task; a task's configs go when the task store
 *   drops the task.
 * - `WebhookSender` (the SDK's `PushNotificationSender`): each configured webhook is
 *   POSTed the event of each **state change** of its task (the task's first event, then
 *   each status update whose state differs from the last one sent; streamed text,
 *   progress and keep-alives are not changes), as a `StreamResponse` in the wire version
 *   the config was registered over (the SDK's serializers), with the config's
 *   `authentication` as `Authorization: SCHEME CREDENTIALS` and its `token` as
 *   `X-A2A-Notification-Token`. Deliveries to one webhook go in order; a failed one
 *   (no connection, a timeout, 5xx, 408, 429) is tried again after a backoff that doubles,
 *   `attempts` times in all, then dropped and logged; another 4xx or a redirect is not
 *   tried again. Nothing of it touches the task: the SDK does not wait for the sender,
 *   and a webhook that hangs or fails only delays its own later notifications (each
 *   attempt is bounded by `timeoutMs`; at most `MAX_PENDING` wait per webhook, the oldest
 *   intermediate ones dropped first).
 */
import { randomUUID } from 'node:crypto'
import { request as httpRequest, type IncomingMessage } from 'node:http'
import { request as httpsRequest } from 'node:https'
import { TaskState, type StreamResponse, type Task, type TaskPushNotificationConfig } from '@a2a-js/sdk'
import { resolveUserScope, V1PushNotificationSerializer, type PushNotificationSender, type PushNotificationStore, type ServerCallContext, type StoredPushNotificationConfig } from '@a2a-js/sdk/server'
import { V03PushNotificationSerializer } from '@a2a-js/sdk/compat/v0_3/server'
import { RequestMalformedError } from '@a2a-js/sdk/errors'
import { errorMessage } from '@dsh/base'
import type { WebhookPolicy } from './webhook-policy.js'

/** Most push-notification configs one task may have. */
const MAX_WEBHOOKS_PER_TASK = 10
/** Most notifications waiting for one webhook; beyond it the oldest that is not a final state is dropped. */
export const MAX_PENDING = 32
/** Default delivery limits: attempts per notification, the first backoff (doubled each time), and each attempt's bound. */
const WEBHOOK_ATTEMPTS = 4
const WEBHOOK_BACKOFF_MS = 500
const WEBHOOK_TIMEOUT_MS = 10_000

const FINAL_STATES: ReadonlySet<TaskState> = new Set([TaskState.TASK_STATE_COMPLETED, TaskState.TASK_STATE_FAILED, TaskState.TASK_STATE_CANCELED, TaskState.TASK_STATE_REJECTED])
const MAX_CONFIG_ID_CHARS = 256

interface Stored {
  scope: string
  entries: StoredPushNotificationConfig[]
}

export class WebhookStore implements PushNotificationStore {
  /** By task id (task ids are this server's UUIDs, unique across scopes); the scope is checked on every access. */
  private readonly byTask = new Map<string, Stored>()

  constructor(private readonly policy: WebhookPolicy) {}

  async save(taskId: string, context: ServerCallContext, config: TaskPushNotificationConfig): Promise<void> {
    const refused = this.policy.refusal(config)
    if (refused !== undefined) throw new RequestMalformedError(`push notification config refused: ${refused}`)
    if (config.id.length > MAX_CONFIG_ID_CHARS) throw new RequestMalformedError(`push notification config refused: its id has more than ${MAX_CONFIG_ID_CHARS} characters`)
    // The SDK reads the id it returns from the object it passed in.
    config.id ||= randomUUID()
    const scope = scopeOf(context)
    let stored = this.byTask.get(taskId)
    if (stored && stored.scope !== scope) throw new RequestMalformedError(`push notification config refused: task ${taskId} is not yours`)
    stored ??= { scope, entries: [] }
    const others = stored.entries.filter((entry) => entry.config.id !== config.id)
    if (others.length >= MAX_WEBHOOKS_PER_TASK) throw new RequestMalformedError(`push notification config refused: task ${taskId} has ${MAX_WEBHOOKS_PER_TASK} configs already, the most this worker keeps; delete one first`)
    others.push({ config: structuredClone({ ...config, taskId }), wireVersion: context.requestedVersion })
    stored.entries = others
    this.byTask.set(taskId, stored)
  }

  async load(taskId: string, context: ServerCallContext): Promise<TaskPushNotificationConfig[]> {
    return (await this.loadWithMetadata(taskId, context)).map((entry) => entry.config)
  }

  async loadWithMetadata(taskId: string, context: ServerCallContext): Promise<StoredPushNotificationConfig[]> {
    const stored = this.byTask.get(taskId)
    if (!stored || stored.scope !== scopeOf(context)) return []
    return structuredClone(stored.entries)
  }

  async delete(taskId: string, context: ServerCallContext, configId?: string): Promise<void> {
    const stored = this.byTask.get(taskId)
    if (!stored || stored.scope !== scopeOf(context)) return
    stored.entries = stored.entries.filter((entry) => entry.config.id !== (configId ?? taskId))
    if (stored.entries.length === 0) this.byTask.delete(taskId)
  }

  /** The task is gone from the task store: its configs go too. */
  forget(taskId: string): void {
    this.byTask.delete(taskId)
  }

  /** Tasks with configs (for tests and diagnostics). */
  get size(): number {
    return this.byTask.size
  }
}

export interface WebhookSenderOptions {
  attempts?: number
  backoffMs?: number
  timeoutMs?: number
  /** Told of each delivery given up, refused or dropped. */
  warn?: (message: string) => void
}

interface Notification {
  body: string
  contentType: string
  final: boolean
  /** What the log names it by: the task and the state. */
  what: string
}

/** One webhook's queue: its deliveries run one at a time, in order. */
interface Queue {
  pending: Notification[]
  running: boolean
}

export class WebhookSender implements PushNotificationSender {
  /** The last state notified per task (a repeated state is no change). */
  private readonly lastState = new Map<string, TaskState>()
  private readonly queues = new Map<string, Queue>()
  /** In-flight requests and backoff timers, stopped by `close`. */
  private readonly inFlight = new Set<() => void>()
  private readonly idleWaiters = new Set<() => void>()
  private closed = false
  private readonly v1 = new V1PushNotificationSerializer()
  private readonly v03 = new V03PushNotificationSerializer()
  private readonly attempts: number
  private readonly backoffMs: number
  private readonly timeoutMs: number

  constructor(
    private readonly store: WebhookStore,
    private readonly policy: WebhookPolicy,
    private readonly options: WebhookSenderOptions = {},
  ) {
    this.attempts = Math.max(1, options.attempts ?? WEBHOOK_ATTEMPTS)
    this.backoffMs = options.backoffMs ?? WEBHOOK_BACKOFF_MS
    this.timeoutMs = options.timeoutMs ?? WEBHOOK_TIMEOUT_MS
  }

  /** Called by the SDK for every event of every task (without waiting): only state changes go out. */
  async send(response: StreamResponse, context: ServerCallContext, task?: Task): Promise<void> {
    if (this.closed) return
    const change = stateChangeOf(response)
    if (change === undefined || this.lastState.get(change.taskId) === change.state) return
    this.lastState.set(change.taskId, change.state)
    const configs = await this.store.loadWithMetadata(change.taskId, context)
    for (const { config, wireVersion } of configs) {
      let serialized
      try {
        serialized = (wireVersion === '0.3' ? this.v03 : this.v1).serialize(response, task)
      } catch (error) {
        this.warn(`push notification for task ${change.taskId} could not be serialized for ${logged(config.url)}: ${errorMessage(error)}`)
        continue
      }
      this.enqueue(config, { body: serialized.body, contentType: serialized.contentType, final: FINAL_STATES.has(change.state), what: `task ${change.taskId} ${stateName(change.state)}` })
    }
  }

  /** The task is gone from the task store: nothing more is sent for it. */
  forget(taskId: string): void {
    this.lastState.delete(taskId)
  }

  /** Resolves once no notification waits or is being delivered (for tests and shutdown). */
  idle(): Promise<void> {
    if (this.isIdle()) return Promise.resolve()
    return new Promise((resolve) => this.idleWaiters.add(resolve))
  }

  /** Give what waits `graceMs` to go out, then stop every delivery. */
  async close(graceMs: number): Promise<void> {
    let timer: NodeJS.Timeout | undefined
    await Promise.race([this.idle(), new Promise<void>((resolve) => (timer = setTimeout(resolve, graceMs)))])
    clearTimeout(timer)
    this.closed = true
    for (const queue of this.queues.values()) queue.pending = []
    for (const stop of [...this.inFlight]) stop()
  }

  private enqueue(config: TaskPushNotificationConfig, notification: Notification): void {
    const key = `${config.taskId}\u0000${config.id}`
    let queue = this.queues.get(key)
    if (!queue) this.queues.set(key, (queue = { pending: [], running: false }))
    queue.pending.push(notification)
    if (queue.pending.length > MAX_PENDING) {
      const dropped = queue.pending.findIndex((waiting) => !waiting.final)
      const [gone] = queue.pending.splice(dropped === -1 ? 0 : dropped, 1)
      this.warn(`push notification ${gone!.what} to ${logged(config.url)} dropped: more than ${MAX_PENDING} wait for that webhook`)
    }
    if (!queue.running) void this.drain(key, queue, config)
  }

  private async drain(key: string, queue: Queue, config: TaskPushNotificationConfig): Promise<void> {
    queue.running = true
    try {
      for (let next = queue.pending.shift(); next !== undefined && !this.closed; next = queue.pending.shift()) await this.deliver(config, next)
    } finally {
      queue.running = false
      if (queue.pending.length === 0) this.queues.delete(key)
      if (this.isIdle()) {
        for (const resolve of this.idleWaiters) resolve()
        this.idleWaiters.clear()
      }
    }
  }

  private isIdle(): boolean {
    return this.queues.size === 0
  }

  /** One notification, tried up to `attempts` times. Never throws. */
  private async deliver(config: TaskPushNotificationConfig, notification: Notification): Promise<void> {
    for (let attempt = 1; attempt <= this.attempts && !this.closed; attempt++) {
      const outcome = await this.post(config, notification)
      if (outcome.ok) return
      if (!outcome.retry || attempt === this.attempts) {
        this.warn(`push notification ${notification.what} to ${logged(config.url)} not delivered${outcome.retry ? ` after ${attempt} attempts` : ''}: ${outcome.why}`)
        return
      }
      await this.pause(this.backoffMs * 2 ** (attempt - 1))
    }
  }

  /** One POST, through the policy's lookup; resolves with what came of it. */
  private post(config: TaskPushNotificationConfig, notification: Notification): Promise<{ ok: true } | { ok: false; retry: boolean; why: string }> {
    return new Promise((resolve) => {
      let url: URL
      try {
        url = new URL(config.url)
      } catch {
        return resolve({ ok: false, retry: false, why: 'its URL is not one' })
      }
      const headers: Record<string, string> = { 'Content-Type': notification.contentType, 'Content-Length': String(Buffer.byteLength(notification.body)) }
      const auth = config.authentication
      if (auth?.scheme && auth.credentials) headers.Authorization = `${auth.scheme} ${auth.credentials}`
      if (config.token) headers['X-A2A-Notification-Token'] = config.token
      const send = url.protocol === 'https:' ? httpsRequest : httpRequest
      let settled = false
      const finish = (outcome: { ok: true } | { ok: false; retry: boolean; why: string }) => {
        if (settled) return
        settled = true
        this.inFlight.delete(stop)
        clearTimeout(timer)
        resolve(outcome)
      }
      const request = send(url, { method: 'POST', headers, lookup: this.policy.lookup, agent: false }, (answer: IncomingMessage) => {
        // The body is not read: only the status says whether it arrived.
        answer.resume()
        const status = answer.statusCode ?? 0
        if (status >= 200 && status < 300) return finish({ ok: true })
        const retry = status >= 500 || status === 408 || status === 429
        finish({ ok: false, retry, why: `it answered ${status}${status >= 300 && status < 400 ? ' (redirects are not followed)' : ''}` })
      })
      const stop = () => {
        request.destroy()
        finish({ ok: false, retry: false, why: 'the server is shutting down' })
      }
      this.inFlight.add(stop)
      const timer = setTimeout(() => {
        request.destroy()
        finish({ ok: false, retry: true, why: `no answer within ${this.timeoutMs} ms` })
      }, this.timeoutMs)
      request.on('error', (error: NodeJS.ErrnoException) => finish({ ok: false, retry: error.code !== 'EWEBHOOKREFUSED', why: errorMessage(error) }))
      request.end(notification.body)
    })
  }

  private pause(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const stop = () => {
        clearTimeout(timer)
        this.inFlight.delete(stop)
        resolve()
      }
      const timer = setTimeout(stop, ms)
      this.inFlight.add(stop)
    })
  }

  private warn(message: string): void {
    this.options.warn?.(message)
  }
}

/** The task and state an event reports, when it reports one (the task itself, a status update). */
function stateChangeOf(response: StreamResponse): { taskId: string; state: TaskState } | undefined {
  const payload = response.payload
  if (payload?.$case === 'task' && payload.value.status) return { taskId: payload.value.id, state: payload.value.status.state }
  if (payload?.$case === 'statusUpdate' && payload.value.status) return { taskId: payload.value.taskId, state: payload.value.status.state }
  return undefined
}

/** A webhook URL as the log shows it: without its query, which may hold a client's secret. */
function logged(url: string): string {
  try {
    const parsed = new URL(url)
    return `${parsed.origin}${parsed.pathname}`
  } catch {
    return '(a URL that does not parse)'
  }
}

function stateName(state: TaskState): string {
  return (TaskState[state] ?? String(state)).replace(/^TASK_STATE_/, '').toLowerCase()
}

function scopeOf(context: ServerCallContext): string {
  return `${context.tenant ?? ''}\u0000${resolveUserScope(context)}`
}
