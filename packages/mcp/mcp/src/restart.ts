/**
 * A stdio server that ended on its own (it exited, or wrote what is not JSON-RPC and was
 * stopped) is started again on the next call, once, with one line saying so: a server
 * that crashed on one bad input serves the rest of the run. One that ends again stays
 * ended, and every later call says so: a server that keeps crashing is reported, never
 * restarted in a loop. Its tools stay the ones listed at dsh's start (the model's list does
 * not change mid-run); a tool the new process no longer has is its error to report.
 */
import { McpError } from './errors.js'
import type { ServerSpec } from './config.js'
import { ServerConnection, type ConnectOptions } from './connection.js'
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js'

export class RestartingServer {
  private restarted = false
  private restarting: Promise<ServerConnection> | undefined
  private closed = false

  constructor(
    private connection: ServerConnection,
    private readonly spec: ServerSpec,
    private readonly options: ConnectOptions,
    /** Told the one line when the server is restarted. */
    private readonly note: (line: string) => void,
  ) {}

  get name(): string {
    return this.connection.name
  }

  /** Call `tool` on the server, started again first if it ended on its own and was not restarted before. */
  async call(tool: string, args: Record<string, unknown>, timeoutMs: number, signal: AbortSignal): Promise<CallToolResult> {
    const connection = await this.live(tool)
    return connection.call(tool, args, timeoutMs, signal)
  }

  /** Stop the server (a restart under way included). Idempotent. */
  async close(): Promise<void> {
    this.closed = true
    await this.restarting?.catch(() => {})
    await this.connection.close()
  }

  private live(tool: string): Promise<ServerConnection> {
    const ended = this.connection.endedBy
    if (ended === undefined || this.closed) return Promise.resolve(this.connection)
    if (this.restarting) return this.restarting
    if (this.restarted) return Promise.reject(new McpError('CLOSED', `MCP server "${this.name}": ${tool} failed: the server ${ended}; it was restarted once already and is not restarted again (restart dsh to try again)`))
    this.restarted = true
    this.note(`MCP server "${this.name}" ${ended}; starting it again for this call (once: if it stops again, it stays stopped)`)
    const restarting = (async () => {
      await this.connection.close()
      const fresh = await ServerConnection.connect(this.spec, this.options)
      if (this.closed) {
        await fresh.close()
        throw new McpError('CLOSED', `MCP server "${this.name}": ${tool} failed: dsh is stopping`)
      }
      this.connection = fresh
      return fresh
    })()
    this.restarting = restarting
    void restarting.then(
      () => (this.restarting = undefined),
      () => (this.restarting = undefined),
    )
    return restarting
  }
}
