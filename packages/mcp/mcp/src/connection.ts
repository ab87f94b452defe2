/**
 * One connected MCP server: started (a process tree for stdio, a session for Streamable
 * HTTP), its tools listed, calls made with a bound, stopped once. Every failure becomes an
 * `McpError` whose message starts with the server's name.
 */
import { childEnvironment } from '@dsh/process'
import { errorMessage } from '@dsh/base'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport, StreamableHTTPError } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js'
import { ErrorCode, McpError as ProtocolError, type CallToolResult, type Tool } from '@modelcontextprotocol/sdk/types.js'
import { expandVariables, type ServerSpec } from './config.js'
import { McpError } from './errors.js'
import { ProcessStdioTransport } from './stdio-transport.js'

export interface ConnectOptions {
  /** dsh's environment: the base of a stdio server's allow-list, and where `${NAME}` of a user's header is read. */
  env: NodeJS.ProcessEnv
  /** Bound on starting the server and listing its tools. */
  startTimeoutMs: number
  /** Whether `${NAME}` may be expanded in this server's values (only in the user's own config). */
  expand: boolean
}

/** The most tools/list pages read from one server: a server that pages for ever is cut off here. */
const MAX_TOOL_PAGES = 100

export class ServerConnection {
  private closing: Promise<void> | undefined

  private constructor(readonly name: string, private readonly client: Client, private readonly transport: Transport, readonly tools: readonly Tool[], readonly readOnlyHints: boolean) {}

  /**
   * Start `spec`'s server, initialise, list its tools, all within one deadline
   * (`startTimeoutMs` from now: a server slow at each step, or paging its tools slowly, does
   * not get the bound once per request); rejects (after stopping whatever started) naming
   * the server.
   */
  static async connect(spec: ServerSpec, options: ConnectOptions): Promise<ServerConnection> {
    const transport = makeTransport(spec, options)
    const client = new Client({ name: 'dsh', version: '0.1.0' }, { capabilities: {} })
    const deadline = new AbortController()
    const timer = setTimeout(() => deadline.abort(new StartDeadline(options.startTimeoutMs)), options.startTimeoutMs)
    // Each request is bounded by what is left of the one deadline (the signal), never by a fresh timeout of its own.
    const bound = () => ({ signal: deadline.signal, timeout: options.startTimeoutMs })
    let step = 'initialize'
    try {
      await client.connect(transport, bound())
      step = 'tools/list'
      const tools: Tool[] = []
      let cursor: string | undefined
      for (let page = 0; page < MAX_TOOL_PAGES; page++) {
        const listed = await client.listTools(cursor === undefined ? {} : { cursor }, bound())
        tools.push(...listed.tools)
        cursor = listed.nextCursor
        if (cursor === undefined) break
      }
      // Only the user's own entry (config, or a user's helper definition: where `${NAME}` is read) has its
      // readOnlyHints trusted; a project's server (.mcp.json, a project's definition) never, whatever it says.
      return new ServerConnection(spec.name, client, transport, tools, options.expand && spec.config.readOnlyHints === true)
    } catch (error) {
      await client.close().catch(() => {})
      await transport.close().catch(() => {})
      const cause = deadline.signal.aborted ? deadline.signal.reason : error
      throw new McpError('START', `MCP server "${spec.name}" (${spec.from}) did not start: ${describeFailure(cause, transport, step, options.startTimeoutMs)}`, { cause })
    } finally {
      clearTimeout(timer)
    }
  }

  /** Call `tool` with `args`; rejects with an `McpError` naming the server and tool when the call cannot end in a result. */
  async call(tool: string, args: Record<string, unknown>, timeoutMs: number, signal: AbortSignal): Promise<CallToolResult> {
    // The SDK adds a listener to the signal it is given and never removes it; the caller's is
    // the whole turn's, shared by every call of it, so each call gets a signal of its own
    // that follows the caller's only while the call runs.
    const ownSignal = new AbortController()
    const follow = () => ownSignal.abort(signal.reason)
    if (signal.aborted) follow()
    else signal.addEventListener('abort', follow, { once: true })
    try {
      return (await this.client.callTool({ name: tool, arguments: args }, undefined, { timeout: timeoutMs, signal: ownSignal.signal })) as CallToolResult
    } catch (error) {
      if (signal.aborted) throw error
      throw new McpError('CLOSED', `MCP server "${this.name}": ${tool} failed: ${describeFailure(error, this.transport, 'tools/call', timeoutMs)}`, { cause: error })
    } finally {
      signal.removeEventListener('abort', follow)
    }
  }

  /**
   * Why the connection ended on its own (a stdio server exited, or wrote what is not
   * JSON-RPC), in words that follow the server's name; `undefined` while it is up, once dsh
   * stopped it, and always for an HTTP server (no process of ours to lose).
   */
  get endedBy(): string | undefined {
    const reason = this.transport instanceof ProcessStdioTransport ? this.transport.closeReason : undefined
    return reason === 'was stopped' ? undefined : reason
  }

  /** Stop the server (its whole process tree, or the HTTP session). Idempotent. */
  close(): Promise<void> {
    this.closing ??= (async () => {
      await this.client.close().catch(() => {})
      await this.transport.close().catch(() => {})
    })()
    return this.closing
  }
}

function makeTransport(spec: ServerSpec, options: ConnectOptions): Transport {
  const { config } = spec
  const value = (text: string, where: string) => (options.expand ? expandVariables(text, options.env, `${spec.from}: servers.${spec.name}.${where}`) : text)
  if ('url' in config) {
    const headers = Object.fromEntries(Object.entries(config.headers ?? {}).map(([name, text]) => [name, value(text, `headers.${name}`)]))
    return new StreamableHTTPClientTransport(new URL(config.url), { requestInit: { headers } })
  }
  // The allow-listed base (PATH, HOME, locale, …) and what the entry names: never dsh's keys.
  const env = childEnvironment(options.env, { env: Object.fromEntries(Object.entries(config.env ?? {}).map(([name, text]) => [name, value(text, `env.${name}`)])) })
  return new ProcessStdioTransport({ server: spec.name, command: config.command, args: config.args ?? [], env, ...(config.cwd !== undefined && { cwd: config.cwd }) })
}

/** Why a request failed, in words: the server's exit or garbage when the connection ended, a timeout by its bound. */
function describeFailure(error: unknown, transport: Transport, method: string, timeoutMs: number): string {
  if (error instanceof StartDeadline) return `it was not started with its tools listed within ${error.timeoutMs} ms (startTimeoutMs; it was at ${method})`
  const reason = transport instanceof ProcessStdioTransport ? transport.closeReason : undefined
  if (error instanceof ProtocolError && error.code === ErrorCode.RequestTimeout) return `no answer to ${method} within ${timeoutMs} ms`
  if (reason !== undefined && reason !== 'was stopped') return `the server ${reason}`
  if (error instanceof ProtocolError && error.code === ErrorCode.ConnectionClosed) return 'the connection closed'
  // The status first: a 401 says "check the token" whatever body the server sent.
  if (error instanceof StreamableHTTPError && error.code !== undefined) return `HTTP ${error.code}: ${oneLine(error.message)}`
  return oneLine(errorMessage(error))
}

/** The abort reason of a connect whose one deadline passed. */
class StartDeadline extends Error {
  constructor(readonly timeoutMs: number) {
    super(`no answer within ${timeoutMs} ms`)
  }
}

const oneLine = (text: string) => text.replace(/\s+/g, ' ').slice(0, 500)
