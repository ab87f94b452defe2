/**
 * When a composition loads `@dsh/mcp` without the config naming it: a helper definition of
 * this run says `mcpServers:`. Those servers (inline ones, or names of the config's) start
 * only with the MCP client; without this the helper's child would run without them and
 * nothing would say so. A run whose helpers name no server loads nothing of MCP.
 */
import { readdirSync, readFileSync } from 'node:fs'
import { join, resolve } from 'node:path'
import type { Context } from 'cordis'
import type {} from '@dsh/agent-definitions'
import type {} from '@dsh/mcp'
import type { PluginEntry } from './config-entries.js'
import { dshHome } from './config-file.js'
import { DEFINITIONS_PLUGIN } from './agent-definitions.js'

export const MCP_PLUGIN = '@dsh/mcp'

/**
 * `entries` with an `@dsh/mcp` entry when the definitions plugin is composed, no entry
 * names `@dsh/mcp` (one the user disabled stays disabled, and `helperServersUnstarted` says so), and a definitions directory it
 * reads holds a file whose front matter has `mcpServers:`. Only the front matter is looked
 * at; the plugin parses the files (and reports their problems) as ever.
 */
export function withHelperMcp(entries: PluginEntry[], user: readonly PluginEntry[], cwd = process.cwd()): PluginEntry[] {
  // Merging drops a disabled entry: the user's config says whether one was written.
  if (entries.some((entry) => entry.name === MCP_PLUGIN) || user.some((entry) => entry.name === MCP_PLUGIN)) return entries
  const definitions = entries.find((entry) => entry.name === DEFINITIONS_PLUGIN && entry.disabled !== true)
  if (definitions === undefined) return entries
  const config = definitions.config ?? {}
  const dirs = [
    ...(config.project !== false ? [join(cwd, '.dsh', 'agents')] : []),
    ...(config.user !== false ? [join(dshHome(), 'agents')] : []),
    ...(config.claudeCode === true ? [join(cwd, '.claude', 'agents')] : []),
    ...(Array.isArray(config.dirs) ? config.dirs.filter((dir): dir is string => typeof dir === 'string').map((dir) => resolve(cwd, dir)) : []),
  ]
  return dirs.some(namesMcpServers) ? [...entries, { id: 'mcp', name: MCP_PLUGIN }] : entries
}

/** Whether a `*.md` file of `dir` has `mcpServers:` in its front matter (the lines between its opening and closing `---`). */
function namesMcpServers(dir: string): boolean {
  let names: string[]
  try {
    names = readdirSync(dir).filter((name) => name.endsWith('.md'))
  } catch {
    // Absent, or unreadable: the definitions plugin reports what it cannot read.
    return false
  }
  return names.some((name) => {
    try {
      const text = readFileSync(join(dir, name), 'utf8')
      const front = /^---\r?\n([\s\S]*?)\r?\n---/.exec(text)?.[1]
      return front !== undefined && /^mcpServers\s*:/m.test(front)
    } catch {
      return false
    }
  })
}

/**
 * The helpers that name MCP servers in a composition without the MCP client (the user's
 * entry disabled it, or a definition came from where `withHelperMcp` does not look), one
 * line saying what to add: their children would otherwise run without the servers, unsaid.
 */
export function helperServersUnstarted(ctx: Context): string | undefined {
  if (ctx.get('mcpServers') !== undefined) return undefined
  const naming = (ctx.get('agentDefinitions')?.list() ?? []).filter((definition) => (definition.mcpServers?.length ?? 0) > 0)
  if (naming.length === 0) return undefined
  return `helper${naming.length === 1 ? '' : 's'} ${naming.map((definition) => definition.name).join(', ')} name${naming.length === 1 ? 's' : ''} MCP servers (mcpServers:), which do not start without the MCP client: add - name: "@dsh/mcp" to your config (or enable it)`
}
