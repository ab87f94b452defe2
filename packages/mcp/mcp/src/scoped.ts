/**
 * MCP servers of one scope rather than of the process: the servers an ACP client sends in
 * `session/new` for that one session (`dsh acp`). They are started and listed as the
 * plugin's are (the same connection, restart-once and result rendering), but their tools
 * are registered through the context the caller gives (an agent's own `agent.ctx`: only
 * that agent sees them, and they go with it), and the caller stops them when the scope
 * ends. They come from whoever opened the scope, not from the user's config, so a tool's
 * `readOnlyHint` is never trusted (every call goes to the approval broker) and `${NAME}`
 * in a value is never read from dsh's environment.
 */
import type { Context } from 'cordis'
import { errorMessage } from '@dsh/base'
import type { Tool } from '@modelcontextprotocol/sdk/types.js'
import type { ServerSpec } from './config.js'
import { ServerConnection, type ConnectOptions } from './connection.js'
import { RestartingServer } from './restart.js'
import { Config, registerTool, type McpConfig } from './plugin.js'

export interface ScopedServersOptions {
  /** dsh's environment: only the allow-listed base of it reaches a stdio server, with what its entry names. */
  env: NodeJS.ProcessEnv
  /** Told each one-line warning (a server that did not start, a tool skipped). */
  warn: (line: string) => void
  /** As the plugin's keys of the same names; their defaults when absent. */
  startTimeoutMs?: number
  callTimeoutMs?: number
  maxOutputChars?: number
}

export class ScopedServers {
  private constructor(
    private readonly started: readonly { server: RestartingServer; tools: readonly Tool[] }[],
    private readonly config: McpConfig,
    private readonly warn: (line: string) => void,
  ) {}

  /**
   * Start `specs` in parallel, each within `startTimeoutMs`; a server that does not start is
   * one warning naming it, and the others serve. Never rejects.
   */
  static async start(specs: readonly ServerSpec[], options: ScopedServersOptions): Promise<ScopedServers> {
    // Every key of the plugin's config has a default: these are the plugin's own bounds.
    const defaults = Config({} as McpConfig)
    const config: McpConfig = {
      ...defaults,
      ...(options.startTimeoutMs !== undefined && { startTimeoutMs: options.startTimeoutMs }),
      ...(options.callTimeoutMs !== undefined && { callTimeoutMs: options.callTimeoutMs }),
      ...(options.maxOutputChars !== undefined && { maxOutputChars: options.maxOutputChars }),
    }
    const connect: ConnectOptions = { env: options.env, startTimeoutMs: config.startTimeoutMs, expand: false }
    const outcomes = await Promise.allSettled(specs.map((spec) => ServerConnection.connect(spec, connect)))
    const started: { server: RestartingServer; tools: readonly Tool[] }[] = []
    for (const [index, outcome] of outcomes.entries()) {
      if (outcome.status === 'rejected') {
        options.warn(`${errorMessage(outcome.reason)}; its tools are left out`)
        continue
      }
      started.push({ server: new RestartingServer(outcome.value, specs[index]!, connect, options.warn), tools: outcome.value.tools })
      if (outcome.value.tools.length === 0) options.warn(`MCP server "${specs[index]!.name}" lists no tools`)
    }
    return new ScopedServers(started, config, options.warn)
  }

  /** The servers that started, by name. */
  get names(): string[] {
    return this.started.map(({ server }) => server.name)
  }

  /** Register every tool as `mcp__<server>__<tool>` through `ctx` (an agent's context: for that agent, until it goes), each call side-effecting. */
  register(ctx: Context): void {
    for (const { server, tools } of this.started) for (const tool of tools) registerTool(ctx, server, false, tool, this.config, this.warn)
  }

  /** Stop every server (their process trees, or HTTP sessions). Idempotent. */
  async stop(): Promise<void> {
    await Promise.all(this.started.map(({ server }) => server.close()))
  }
}
