/**
 * A dsh agent behind the A2A protocol, on the official SDK's server classes: an agent
 * card at `/.well-known/agent-card.json`, JSON-RPC at `/a2a/jsonrpc`, tasks executed by
 * `DshAgentExecutor` (one dsh session per task). With a token every request but the
 * card's must carry it (the card is public: it says so); without one the server listens on
 * loopback only. A side effect the approval broker
 * leaves to ask is asked of the task's caller (`input-required`), unless `permission`
 * says the server decides alone.
 */
import { createServer, type Server } from 'node:http'
import { createRequire } from 'node:module'
import type { AddressInfo } from 'node:net'
import express from 'express'
import { agentCardHandler, jsonRpcHandler, restHandler } from '@a2a-js/sdk/server/express'
import { DefaultExecutionEventBusManager } from '@a2a-js/sdk/server'
import { legacyAgentCardRouter } from '@a2a-js/sdk/compat/v0_3/server/express'
import type { Context } from 'cordis'
import { DEFAULT_MAX_DEPTH } from '@dsh/subagent'
import { FifoSlots, servedHostNames } from '@dsh/base'
import { requireBearer, requireServedHost } from './auth.js'
import { approverUserBuilder } from './approver.js'
import { AGENT_CARD_PATH, dshAgentCard, JSON_RPC_PATH, REST_PATH } from './card.js'
import { restBindingConventions } from './rest-binding.js'
import { helperSkill, skillHelpers } from './skills.js'
import { A2aServerError } from './errors.js'
import { DshAgentExecutor, type A2aTaskEvent } from './executor.js'
import { DshRequestHandler } from './request-handler.js'
import { BoundedTaskStore } from './task-store.js'
import { Contexts } from './contexts.js'
import { WebhookPolicy, type WebhookPolicyOptions } from './webhook-policy.js'
import { WebhookSender, WebhookStore, type WebhookSenderOptions } from './webhooks.js'
import { installPermission, type Answerer, type PermissionPolicy } from './approvals.js'
import { parsePermissionPolicy } from '@dsh/approvals'

const { version } = createRequire(import.meta.url)('../package.json') as { version: string }

const DEFAULT_MAX_TASKS = 4
/** At shutdown, how long notifications still waiting (the cancelled tasks' last) may take to go out. */
const WEBHOOK_SHUTDOWN_GRACE_MS = 2_000
/** Longest prompt text a task may carry (the HTTP body limit, 100 kB of JSON, refuses larger bodies first). */
const DEFAULT_MAX_PROMPT_CHARS = 64_000
/**
 * How often a waiting or working task sends a keep-alive status update (advertised in the
 * card). `@dsh/subagent-a2a` gives up on a worker silent for several of these periods.
 */
export const KEEPALIVE_INTERVAL_MS = 2_000

export interface A2aServerOptions {
  /** Default 127.0.0.1. Any other address needs `token`. */
  host?: string
  /** Default 0: a free port (read it from `url`). */
  port?: number
  /** The bearer token every request must carry. */
  token?: string
  /** How many tasks run at once; the rest wait. Default `DEFAULT_MAX_TASKS`. */
  maxTasks?: number
  /** The deepest delegation a task's lineage may ask for. Default that of `dsh acp` (3). */
  maxDepth?: number
  /** The base URL the card advertises; default `http://HOST:PORT`. Set it when clients reach the server by another name. */
  publicUrl?: string
  /** The cwd of each task's session; default the process cwd. */
  cwd?: string
  /** The card's name; default `dsh`. */
  name?: string
  /**
   * Push notifications (`webhooks.ts`, `webhook-policy.ts`): the URL patterns a webhook
   * must match (none: push notifications are off, and the card says so) and the networks
   * outside the public internet it may reach; the delivery limits are for tests.
   */
  webhooks?: WebhookPolicyOptions & Pick<WebhookSenderOptions, 'attempts' | 'backoffMs' | 'timeoutMs'>
  /**
   * Who decides a side effect the approval broker (`ctx.approvals`) leaves to ask: `ask`
   * (default) the task's caller, through `input-required`; `allow` / `reject` the server
   * alone, for callers that cannot answer (the broker's default). `allow` and `reject`
   * need the broker; without one, side effects are not gated at all.
   */
  permission?: PermissionPolicy
  /**
   * With `permission: ask`, the token whose bearer answers a task's `input-required`
   * request: an answer from a request without it is refused. It also admits every request,
   * as `token` does. Must differ from `token` (every caller would hold it).
   */
  approverToken?: string
  /**
   * With `permission: ask`, let a task's caller answer its own requests (a dsh parent whose
   * user answers through its own broker). Without it, and without `approverToken`, what no
   * rule decided is rejected at once, with a reason naming both.
   */
  trustCallerApprovals?: boolean
  /** Told as each task starts and ends (`A2aTaskEvent`); `dsh a2a serve` logs a line for each. */
  onTask?: (event: A2aTaskEvent) => void
}

export interface A2aServer {
  /** The base URL clients use (the card's interfaces are under it). */
  readonly url: string
  /** Tasks running or waiting now. */
  readonly taskCount: number
  /** Stop accepting, cancel every task, wait until each session is disposed, then close every connection. */
  close(): Promise<void>
}

export function isLoopback(host: string): boolean {
  return host === 'localhost' || host === '::1' || /^127\.\d+\.\d+\.\d+$/.test(host)
}

/** An address that means "every interface": no client can reach the server by it. */
function isWildcard(host: string): boolean {
  return host === '0.0.0.0' || host === '::' || host === '[::]' || /^(0+:){7}0+$/.test(host)
}

/** Serve the agents of `ctx` (it needs `ctx.agents`; `ctx.tasks` when loaded is waited for and killed on cancel). */
export async function serveA2a(ctx: Context, options: A2aServerOptions = {}): Promise<A2aServer> {
  const host = options.host ?? '127.0.0.1'
  const maxTasks = options.maxTasks ?? DEFAULT_MAX_TASKS
  const maxDepth = options.maxDepth ?? DEFAULT_MAX_DEPTH
  if (!Number.isInteger(maxTasks) || maxTasks < 1) throw new A2aServerError('INVALID_OPTION', `maxTasks must be a whole number of at least 1 (got ${String(maxTasks)})`)
  if (!Number.isInteger(maxDepth) || maxDepth < 0) throw new A2aServerError('INVALID_OPTION', `maxDepth must be a whole number of at least 0 (got ${String(maxDepth)})`)
  if (options.token !== undefined && options.token.length === 0) throw new A2aServerError('INVALID_OPTION', 'the token is empty; set a non-empty token or none')
  if (!options.token && !isLoopback(host)) {
    throw new A2aServerError('INSECURE_LISTEN', `refusing to listen on ${host} without a token: anyone who reaches it could run the agent; pass --token-env NAME (a variable holding a bearer token) or listen on 127.0.0.1`)
  }
  // The card would advertise http://0.0.0.0:PORT, which a remote client resolves to itself.
  if (isWildcard(host) && options.publicUrl === undefined) {
    throw new A2aServerError('INVALID_OPTION', `listening on ${host} needs a public URL for the agent card (clients cannot connect to ${host}); pass --public-url http://THIS-HOST:PORT`)
  }
  const read = parsePermissionPolicy(options.permission ?? 'ask', false)
  if (!read.ok) throw new A2aServerError('INVALID_OPTION', `permission ${read.problem}`)
  const permission = read.value
  const answerer = answererOf(options, permission, options.token)
  const approvals = ctx.get('approvals')
  if (approvals === undefined && options.permission !== undefined && options.permission !== 'ask') {
    throw new A2aServerError('INVALID_OPTION', `permission ${options.permission} needs the approval broker (- id: approvals, name: "@dsh/approvals" in the composition), which is not loaded`)
  }

  const policy = new WebhookPolicy(options.webhooks)
  const slots = new FifoSlots(maxTasks)
  const helpers = skillHelpers(ctx)
  const contexts = new Contexts(ctx)
  const log = ctx.logger('a2a-server')
  const webhookStore = new WebhookStore(policy)
  const webhookSender = new WebhookSender(webhookStore, policy, { ...options.webhooks, warn: (message) => log.warn(message) })
  const taskStore = new BoundedTaskStore(undefined, undefined, (taskId) => {
    webhookStore.forget(taskId)
    webhookSender.forget(taskId)
  })
  const buses = new DefaultExecutionEventBusManager()
  const executor = new DshAgentExecutor(ctx, slots, contexts, { maxDepth, cwd: options.cwd ?? process.cwd(), maxPromptChars: DEFAULT_MAX_PROMPT_CHARS, keepAliveMs: KEEPALIVE_INTERVAL_MS, helpers, answerer, ...(options.onTask !== undefined && { onTask: options.onTask }) }, { store: taskStore, sender: policy.allowsAny ? webhookSender : undefined, buses })
  const app = express()
  app.disable('x-powered-by')
  // Before anything else, the card included: only requests addressed to this server (no DNS-rebinding page, no other page's Origin).
  let served: ReadonlySet<string> = new Set()
  app.use(requireServedHost(() => served))
  // Every request but the card's needs a token when there is one (the server's, or the approver's): the card is public, and says a token is needed.
  if (options.token) app.use(requireBearer({ card: AGENT_CARD_PATH, jsonRpc: JSON_RPC_PATH, rest: REST_PATH }, options.token, ...(options.approverToken === undefined ? [] : [options.approverToken])))

  const http = createServer(app)
  await listen(http, host, options.port ?? 0)
  const { port } = http.address() as AddressInfo
  const url = options.publicUrl?.replace(/\/+$/, '') ?? `http://${host.includes(':') ? `[${host}]` : host}:${port}`
  served = servedHostNames(host, port, options.publicUrl === undefined ? [] : [new URL(url).host])
  const skills = [...helpers.values()].map(helperSkill)
  const card = dshAgentCard({ publicUrl: url, version, name: options.name ?? 'dsh', bearer: options.token !== undefined, keepAliveMs: KEEPALIVE_INTERVAL_MS, skills, namedContexts: contexts.continuable, pushNotifications: policy.allowsAny })
  const requestHandler = new DshRequestHandler(card, taskStore, executor, contexts, { store: webhookStore, sender: webhookSender }, buses)
  // From here a side effect the broker leaves to ask is asked of the task's caller (or decided by the policy).
  const removePermission = approvals === undefined ? () => {} : installPermission(approvals, permission, executor, answerer)
  // The card is made once, at start: its Last-Modified is the start (with the ETag express
  // adds, a client can revalidate it with If-Modified-Since or If-None-Match and get 304).
  const cardModified = new Date(Math.floor(Date.now() / 1000) * 1000).toUTCString()
  app.use(AGENT_CARD_PATH, (_request, response, next) => {
    response.setHeader('Last-Modified', cardModified)
    next()
  })
  // The 0.3-shaped card (the SDK's translation) only to a client that asks for 0.3; any other
  // request, one without A2A-Version included, gets the 1.0 card (1.0 clients and the
  // conformance kit read the card without the header). It lists the 0.3 interfaces too.
  const legacyCard = legacyAgentCardRouter({ agentCardProvider: requestHandler })
  app.use(AGENT_CARD_PATH, (request, response, next) => (asksForLegacy(request.get('a2a-version')) ? legacyCard(request, response, next) : next()))
  app.use(AGENT_CARD_PATH, agentCardHandler({ agentCardProvider: requestHandler }))
  // Who sent a message (the approver, or anyone else) reaches the request handler as the call's user.
  const userBuilder = approverUserBuilder(options.approverToken)
  // 0.3 clients (A2A-Version 0.3, or none) are served by the SDK's compatibility layer over the same request handler.
  app.use(JSON_RPC_PATH, jsonRpcHandler({ requestHandler, userBuilder, legacyCompat: { enabled: true } }))
  // The same request handler behind the HTTP+JSON binding: one set of tasks, two bindings.
  app.use(REST_PATH, restBindingConventions(), restHandler({ requestHandler, userBuilder, legacyCompat: { enabled: true } }))

  let closing: Promise<void> | undefined
  return {
    url,
    get taskCount() {
      return executor.size
    },
    close: () => {
      closing ??= (async () => {
        const stopped = new Promise<void>((resolve) => http.close(() => resolve()))
        await executor.cancelAll('the A2A server is shutting down')
        removePermission()
        // The cancelled tasks' last notifications get a moment to go out; then every delivery stops.
        await webhookSender.close(WEBHOOK_SHUTDOWN_GRACE_MS)
        // Streams of finished tasks end on their own; whatever is still open is cut.
        http.closeAllConnections()
        await stopped
      })()
      return closing
    },
  }
}

/** Who answers `input-required` requests (`Answerer`), or `INVALID_OPTION` for a combination that cannot mean what it says. */
function answererOf(options: A2aServerOptions, permission: PermissionPolicy, token: string | undefined): Answerer {
  const { approverToken, trustCallerApprovals } = options
  if (approverToken === undefined && trustCallerApprovals !== true) return 'nobody'
  // Under allow they answer what a dsh parent's lineage does not allow (`installPermission`).
  if (permission === 'reject') throw new A2aServerError('INVALID_OPTION', 'an approver and trusting callers only choose who answers with permission ask or allow; with permission reject nobody is asked (drop one of the two)')
  if (approverToken === undefined) return 'caller'
  if (approverToken.length === 0) throw new A2aServerError('INVALID_OPTION', 'the approver token is empty; set a non-empty token or none')
  if (approverToken === token) throw new A2aServerError('INVALID_OPTION', "the approver token is the worker's token, which every caller holds: callers would approve their own side effects; choose another approver token (or trust callers explicitly)")
  return trustCallerApprovals === true ? 'caller' : 'approver'
}

/** An explicit request for the 0.3 protocol (`A2A-Version: 0.3` or `0.3.x`). */
function asksForLegacy(version: string | undefined): boolean {
  return version !== undefined && /^\s*0\.3(\.\d+)?\s*$/.test(version)
}

function listen(http: Server, host: string, port: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const onError = (error: NodeJS.ErrnoException) => reject(new A2aServerError('LISTEN_FAILED', `cannot listen on ${host}:${port}: ${error.code ?? error.message}; choose another --host or --port`, { cause: error }))
    http.once('error', onError)
    http.listen(port, host, () => {
      http.off('error', onError)
      resolve()
    })
  })
}
