/**
 * The MCP servers a delegation names (`SubagentRequest.mcpServers`, a helper's
 * `mcpServers:`) as a provider whose child is another program gets them. Only names travel
 * in a request; each is resolved by this process's MCP client (`ctx.mcpServers` of
 * `@dsh/mcp`, read by shape: no provider imports the MCP client), so a child runs only a
 * server this process would run itself. Environment values and headers are read from the
 * user's config at start and go only into the one child's start; never logged.
 */
import type { Context } from 'cordis'
import { SubagentError } from './errors.js'

/** A server as `ctx.mcpServers.resolve(name)` gives it (`ResolvedServer` of `@dsh/mcp`): its entry, `${NAME}` values read. */
export interface ResolvedMcpServer {
  name: string
  config: { command: string; args?: string[]; env?: Record<string, string>; cwd?: string } | { type: 'http'; url: string; headers?: Record<string, string> }
}

/** A server of this process by name; undefined when it has none of that name (or no MCP client). It throws naming a `${NAME}` that is unset. */
export type McpServerLookup = (name: string) => ResolvedMcpServer | undefined

/** The lookup of `ctx`'s MCP client (`ctx.mcpServers`), read when called: a client composed later is found. */
export function mcpServerLookup(ctx: Context): McpServerLookup {
  return (name) => (ctx.get('mcpServers') as { resolve?(name: string): ResolvedMcpServer | undefined } | undefined)?.resolve?.(name)
}

/**
 * The servers of `names`, each required: a name this process has no server for refuses the
 * delegation (`INVALID_REQUEST`) before the child starts, since a child run without the
 * tools its helper names would do other work than asked. `who` names the child.
 */
export function requiredMcpServers(names: readonly string[] | undefined, lookup: McpServerLookup | undefined, who: string): ResolvedMcpServer[] {
  return (names ?? []).map((name) => {
    const server = lookup?.(name)
    if (server === undefined) {
      throw new SubagentError('INVALID_REQUEST', `${who} names MCP server "${name}", which this process does not run; add it to the servers of the @dsh/mcp entry of your config (a project's server runs only where your config allows it)`)
    }
    return server
  })
}
