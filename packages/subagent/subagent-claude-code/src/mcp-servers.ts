/**
 * A helper's MCP servers (`SubagentRequest.mcpServers`, names only) as a Claude Code child
 * gets them: the Agent SDK's `mcpServers` option. Each name is resolved by this process's
 * MCP client (`ctx.mcpServers` of `@dsh/mcp`, read by shape: not a dependency of this
 * provider), so the child runs only a server this process would run itself; a name it does
 * not have refuses the delegation before Claude Code starts (`requiredMcpServers` of
 * `@dsh/subagent`).
 */
import type { McpServerConfig } from '@anthropic-ai/claude-agent-sdk'
import { requiredMcpServers, SubagentError, type McpServerLookup } from '@dsh/subagent'

/** The SDK's `mcpServers` for `names`; undefined for none. `who` names the child in a refusal. */
export function claudeMcpServers(names: readonly string[] | undefined, lookup: McpServerLookup | undefined, who: string): Record<string, McpServerConfig> | undefined {
  if (names === undefined || names.length === 0) return undefined
  const servers: Record<string, McpServerConfig> = {}
  for (const { name, config } of requiredMcpServers(names, lookup, who)) {
    if ('url' in config) {
      servers[name] = { type: 'http', url: config.url, ...(config.headers && { headers: config.headers }) }
      continue
    }
    // The SDK's stdio entry has no working directory: a server that needs one would run elsewhere than configured.
    if (config.cwd !== undefined) throw new SubagentError('INVALID_REQUEST', `${who} names MCP server "${name}", whose entry sets cwd, which Claude Code's mcpServers cannot carry; remove cwd from its entry (or start it through a command that changes directory)`)
    servers[name] = { type: 'stdio', command: config.command, ...(config.args && { args: config.args }), ...(config.env && { env: config.env }) }
  }
  return servers
}
