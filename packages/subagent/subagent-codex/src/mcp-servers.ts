/**
 * A helper's MCP servers (`SubagentRequest.mcpServers`, names only) as a Codex child gets
 * them: `thread/start`'s config overrides, one `mcp_servers.<name>` table each, as Codex's
 * config.toml would hold it. Each name is resolved by this process's MCP client
 * (`ctx.mcpServers` of `@dsh/mcp`, read by shape: not a dependency of this provider), so a
 * Codex child runs only a server this process would run itself; a name it does not have
 * refuses the delegation before Codex starts (`requiredMcpServers` of `@dsh/subagent`).
 */
import { requiredMcpServers, type McpServerLookup } from '@dsh/subagent'
import type { JsonValue } from './protocol/serde_json/JsonValue.js'

/** The config overrides naming `names`' servers for Codex; undefined for none. `who` names the child in the refusal. */
export function codexMcpConfig(names: readonly string[] | undefined, lookup: McpServerLookup | undefined, who: string): Record<string, JsonValue> | undefined {
  if (names === undefined || names.length === 0) return undefined
  const overrides: Record<string, JsonValue> = {}
  for (const { name, config } of requiredMcpServers(names, lookup, who)) {
    // Dotted keys add one table each, leaving the servers of Codex's own config.toml as they are.
    overrides[`mcp_servers.${name}`] =
      'url' in config
        ? { url: config.url, ...(config.headers && { http_headers: config.headers }) }
        : { command: config.command, ...(config.args && { args: config.args }), ...(config.env && { env: config.env }), ...(config.cwd !== undefined && { cwd: config.cwd }) }
  }
  return overrides
}
