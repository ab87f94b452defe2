/**
 * dsh's helpers as MCP tools, on the official SDK's protocol `Server` (one per connection:
 * the stdio client, or each Streamable HTTP session), sharing one call runner, one bound on
 * calls and one approval front-end. The low-level `Server` rather than `McpServer`: the
 * tools' schemas are JSON Schema written here, not zod.
 */
import { createRequire } from 'node:module'
import type { Context } from 'cordis'
import { Server } from '@modelcontextprotocol/sdk/server/index.js'
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js'
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js'
import { CallToolRequestSchema, ElicitResultSchema, ListToolsRequestSchema, type CallToolRequest, type CallToolResult } from '@modelcontextprotocol/sdk/types.js'
import { FifoSlots, printable } from '@dsh/base'
import { DEFAULT_MAX_DEPTH } from '@dsh/subagent'
import { parsePermissionPolicy, type PermissionPolicy } from '@dsh/approvals'
import { installPermission } from './approvals.js'
import { CallRunner, errorResult, type CallWire, type McpCallEvent } from './calls.js'
import { McpServerError } from './errors.js'
import { servedTools, promptOf, type ServedTool } from './tools.js'

const { version } = createRequire(import.meta.url)('../package.json') as { version: string }

/** Calls that run at once by default; more wait. */
export const DEFAULT_MAX_CALLS = 4
/** Calls that may wait for a slot by default; more are refused at once. */
export const DEFAULT_MAX_QUEUED = 64

export interface McpServeOptions {
  /** Calls that run at once (default `DEFAULT_MAX_CALLS`); more wait in arrival order. */
  maxCalls?: number
  /** Calls that may wait (default `DEFAULT_MAX_QUEUED`); beyond it a call is an error result at once. */
  maxQueued?: number
  /** The deepest delegation a call's agent may start (default that of `dsh acp`, 3). */
  maxDepth?: number
  /** The cwd of every call's session; default the process cwd. */
  cwd?: string
  /** Who decides a side effect no approval rule decides: `ask` (default) the client through elicitation, else the policy. */
  permission?: PermissionPolicy
  /** Told as each call starts and ends; observe-only. */
  onCall?: (event: McpCallEvent) => void
}

/** The part every connection shares. */
export class McpServe {
  readonly tools: ReadonlyMap<string, ServedTool>
  private readonly runner: CallRunner
  private readonly slots: FifoSlots
  private readonly removePermission: () => void
  private readonly servers = new Set<Server>()
  private closing: Promise<void> | undefined

  constructor(ctx: Context, options: McpServeOptions = {}) {
    const maxCalls = options.maxCalls ?? DEFAULT_MAX_CALLS
    const maxQueued = options.maxQueued ?? DEFAULT_MAX_QUEUED
    const maxDepth = options.maxDepth ?? DEFAULT_MAX_DEPTH
    if (!Number.isInteger(maxCalls) || maxCalls < 1) throw new McpServerError('INVALID_OPTION', `maxCalls must be a whole number of at least 1 (got ${String(maxCalls)})`)
    if (!Number.isInteger(maxQueued) || maxQueued < 0) throw new McpServerError('INVALID_OPTION', `maxQueued must be a whole number of at least 0 (got ${String(maxQueued)})`)
    if (!Number.isInteger(maxDepth) || maxDepth < 0) throw new McpServerError('INVALID_OPTION', `maxDepth must be a whole number of at least 0 (got ${String(maxDepth)})`)
    const read = parsePermissionPolicy(options.permission ?? 'ask', false)
    if (!read.ok) throw new McpServerError('INVALID_OPTION', `permission ${read.problem}`)
    const approvals = ctx.get('approvals')
    // Fail closed: without the broker nothing would stand between a client and this machine's side effects.
    if (approvals === undefined) throw new McpServerError('INVALID_OPTION', 'the composition has no approval broker (- id: approvals, name: "@dsh/approvals"), so nothing would decide the side effects its clients ask for')
    const log = ctx.logger('mcp-server')
    const warn = (line: string) => log.warn('%s', line)
    this.tools = servedTools(ctx, warn)
    this.slots = new FifoSlots(maxCalls, maxQueued)
    this.runner = new CallRunner(ctx, { maxDepth, cwd: options.cwd ?? process.cwd(), slots: this.slots, warn, ...(options.onCall && { onCall: options.onCall }) })
    this.removePermission = installPermission(approvals, read.value, this.runner.byAgent)
  }

  /** Calls running or waiting. */
  get callCount(): number {
    return this.runner.size
  }

  /** Serve one connection over `transport`; the protocol server is forgotten when it closes. */
  async connect(transport: Transport): Promise<Server> {
    if (this.closing) throw new McpServerError('CLOSED', 'the server is shutting down')
    const server = new Server({ name: 'dsh', version }, { capabilities: { tools: { listChanged: false } }, instructions: 'Each tool delegates a task to a dsh agent (a helper defined in dsh, or the general "delegate"); pass the whole task as "prompt".' })
    server.setRequestHandler(ListToolsRequestSchema, () => ({ tools: [...this.tools.values()].map((served) => served.tool) }))
    server.setRequestHandler(CallToolRequestSchema, (request, extra) => this.call(server, request, extra))
    this.servers.add(server)
    server.onclose = () => this.servers.delete(server)
    await server.connect(transport)
    return server
  }

  /** Stop every call (each agent disposed, its session flushed), then close every connection. Idempotent. */
  close(): Promise<void> {
    this.closing ??= (async () => {
      await this.runner.close()
      this.removePermission()
      await Promise.allSettled([...this.servers].map((server) => server.close()))
    })()
    return this.closing
  }

  private call(server: Server, request: CallToolRequest, extra: Parameters<Parameters<Server['setRequestHandler']>[1]>[1]): Promise<CallToolResult> | CallToolResult {
    const { name } = request.params
    const served = this.tools.get(name)
    // An unknown tool and bad arguments are the call's error result (as the SDK's own
    // McpServer answers them), naming what was refused, so a model reading it can correct itself.
    if (served === undefined) return errorResult(`unknown tool ${JSON.stringify(printable(name.slice(0, 128)))}; this server's tools: ${[...this.tools.keys()].join(', ')}`)
    const read = promptOf(name, request.params.arguments)
    if ('problem' in read) return errorResult(read.problem)
    if (this.slots.full) return errorResult(`${name}: dsh mcp serve is at its bound: ${this.slots.limit} calls run and ${this.slots.maxQueued} wait; call again once one has ended`)
    const progressToken = request.params._meta?.progressToken
    const wire: CallWire = { meta: request.params._meta, signal: extra.signal }
    if (progressToken !== undefined) {
      wire.progress = (progress, message) => extra.sendNotification({ method: 'notifications/progress', params: { progressToken, progress, message } })
    }
    if (asksByForm(server.getClientCapabilities()?.elicitation)) {
      wire.elicit = (params, signal, timeout) => extra.sendRequest({ method: 'elicitation/create', params }, ElicitResultSchema, { signal, timeout })
    }
    return this.runner.run(served, read.prompt, wire)
  }
}

/**
 * Whether a client's `elicitation` capability takes forms: `{}` (the form of older clients)
 * or one naming `form`; a client that declared only `url` cannot be asked this way.
 */
function asksByForm(elicitation: { form?: unknown; url?: unknown } | undefined): boolean {
  return elicitation !== undefined && (elicitation.form !== undefined || elicitation.url === undefined)
}

export interface StdioServing {
  /** Settles once the client closed its end (stdin) or `close()` was called, every call ended: the reason, in words. */
  readonly ended: Promise<string>
  close(): Promise<void>
}

/** Serve `ctx`'s helpers as MCP tools on stdin/stdout (one client); stdout carries frames and nothing else. */
export async function serveMcpOverStdio(ctx: Context, options: McpServeOptions & { stdin?: NodeJS.ReadableStream; stdout?: NodeJS.WritableStream } = {}): Promise<StdioServing> {
  const serve = new McpServe(ctx, options)
  const stdin = (options.stdin ?? process.stdin) as NodeJS.ReadStream
  const transport = new StdioServerTransport(stdin, (options.stdout ?? process.stdout) as NodeJS.WriteStream)
  let reason = 'closed'
  let ended!: (why: string) => void
  const done = new Promise<string>((resolve) => (ended = resolve))
  const close = async (why: string) => {
    reason = why
    await serve.close()
    ended(reason)
  }
  // The SDK's stdio transport does not watch for the end of input: a client that closed its end is gone.
  stdin.once('end', () => void close('the client closed stdin'))
  await serve.connect(transport)
  return { ended: done, close: () => close('closed') }
}
