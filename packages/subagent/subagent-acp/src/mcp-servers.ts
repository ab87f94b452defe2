/**
 * The MCP servers an ACP child gets: the names a delegation asks for
 * (`SubagentRequest.mcpServers`, a helper's `mcpServers:`), resolved by this process's own
 * MCP config (`ctx.mcpServers` of `@dsh/mcp`, read by shape: a provider does not import the
 * MCP client), and sent in `session/new` (and `session/load`) in ACP's shape. Only names
 * travel to here; an entry's environment values and headers are read from the user's config
 * at start, go into that one frame to that one child, and are never logged.
 */
import type { McpCapabilities, McpServer } from '@agentclientprotocol/sdk'
import { errorMessage } from '@dsh/base'
import type { ResolvedMcpServer } from '@dsh/subagent'

/** A configured server as `@dsh/mcp` resolves it for a child program (`ctx.mcpServers.resolve`). */
export type McpServerEntry = ResolvedMcpServer

/** What this provider reads of `ctx.mcpServers`: `resolve`, a server by name with its `${NAME}` values read (it throws naming a variable that is unset). */
export interface McpServerTable {
  resolve(name: string): McpServerEntry | undefined
}

/**
 * The entries of `names`, as `lookup` resolves them. A name this process has no server for
 * (not configured, or `@dsh/mcp` not composed), or one whose entry cannot be read (a
 * `${NAME}` that is unset), is one warning naming it, and the child starts without it.
 */
export function resolveMcpServers(names: readonly string[] | undefined, table: McpServerTable | undefined, warn: (line: string) => void): McpServerEntry[] {
  const entries: McpServerEntry[] = []
  for (const name of new Set(names ?? [])) {
    let entry: McpServerEntry | undefined
    try {
      entry = table?.resolve(name)
    } catch (error) {
      warn(`MCP server "${name}" is not sent to the ACP child: ${errorMessage(error)}`)
      continue
    }
    if (entry === undefined) warn(`MCP server "${name}" is not sent to the ACP child: it is not among the servers of this process's @dsh/mcp entry${table === undefined ? ' (no @dsh/mcp entry is composed)' : ''}; add it there`)
    else entries.push(entry)
  }
  return entries
}

/**
 * `entries` as `session/new`'s `mcpServers`: a stdio server always (ACP has no `cwd` for
 * one, so an entry with a `cwd` is left out, saying so), an HTTP server only when the agent
 * advertised `mcpCapabilities.http` at `initialize`; each one left out is one warning
 * naming it (never its values). `agent` names the agent in the warning.
 */
export function acpMcpServers(entries: readonly McpServerEntry[], capabilities: McpCapabilities | undefined, agent: string, warn: (line: string) => void): McpServer[] {
  const servers: McpServer[] = []
  const pairs = (values: Readonly<Record<string, string>> | undefined) => Object.entries(values ?? {}).map(([name, value]) => ({ name, value }))
  for (const { name, config } of entries) {
    if ('url' in config) {
      if (capabilities?.http === true) servers.push({ type: 'http', name, url: config.url, headers: pairs(config.headers) })
      else warn(`MCP server "${name}" is not sent to the ACP agent (${agent}): it is an HTTP server and the agent does not advertise mcpCapabilities.http; the child runs without its tools`)
      continue
    }
    if (config.cwd !== undefined) {
      warn(`MCP server "${name}" is not sent to the ACP agent (${agent}): ACP's session/new cannot carry its cwd; give absolute paths in its args and drop cwd to send it`)
      continue
    }
    servers.push({ name, command: config.command, args: [...(config.args ?? [])], env: pairs(config.env) })
  }
  return servers
}
