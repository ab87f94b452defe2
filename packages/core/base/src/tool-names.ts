/**
 * Tool lists that name tools by pattern: an entry ending in `*` names every tool whose name
 * starts with what precedes it (`mcp__github__*`: the tools of one MCP server, whose names
 * are `mcp__<server>__<tool>`). A helper's `tools:` and `disallowedTools:` take such entries.
 */

/** A tool name (what model APIs accept), or such a name ending in `*`. */
export const TOOL_NAME_OR_PATTERN = /^[A-Za-z0-9_-]{1,64}\*?$/

export function isToolPattern(entry: string): boolean {
  return entry.endsWith('*')
}

/** Whether the list entry `entry` names the tool `name`. */
export function toolEntryMatches(entry: string, name: string): boolean {
  return isToolPattern(entry) ? name.startsWith(entry.slice(0, -1)) : entry === name
}

/**
 * `entries` with each pattern replaced by the tools of `known` it names (in `known`'s
 * order), each name once. A pattern that names no tool adds none: the tools it means may be
 * absent (a server that did not start), and an allow list only narrows.
 */
export function expandToolEntries(entries: readonly string[], known: readonly string[]): string[] {
  const names = new Set<string>()
  for (const entry of entries) {
    if (!isToolPattern(entry)) names.add(entry)
    else for (const name of known) if (toolEntryMatches(entry, name)) names.add(name)
  }
  return [...names]
}

/** The name an agent calls an MCP server's tool by: `mcp__<server>__<tool>` (the convention Claude Code and others use). */
export function mcpToolName(server: string, tool: string): string {
  return `${MCP_PREFIX}${server}__${tool}`
}

const MCP_PREFIX = 'mcp__'

/**
 * The MCP server of a tool named `mcp__<server>__<tool>` (`mcpToolName`), or `undefined` for
 * any other name. The server is what lies before the next `__`, as a `mcp__<server>` rule reads it.
 */
export function mcpServerOf(name: string): string | undefined {
  if (!name.startsWith(MCP_PREFIX)) return undefined
  const end = name.indexOf('__', MCP_PREFIX.length)
  return end > MCP_PREFIX.length && end + 2 < name.length ? name.slice(MCP_PREFIX.length, end) : undefined
}
