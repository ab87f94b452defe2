/**
 * A definition's `mcpServers:` (Claude Code's agent-file field): the MCP servers its child
 * gets. Each entry is the name of a server of the user's `@dsh/mcp` config (`github`), or an
 * inline server, a one-key mapping `{ name: { command, args?, env?, cwd? } }` (stdio) or
 * `{ name: { type: http, url, headers? } }`, which `@dsh/mcp` starts for the helpers that
 * define it (a project's file only where the user's config allows it). The shape is checked
 * here, so a mistake is one line naming the file and the field's line before anything starts.
 */
import { isRecord, printable } from '@dsh/base'

/** An inline server of a definition: its name and its entry, as `@dsh/mcp`'s `servers` would hold it. */
export interface InlineMcpServer {
  name: string
  config: Readonly<Record<string, unknown>>
}

/** One entry of `mcpServers:`: a server of the user's config by name, or an inline one. */
export type McpServerEntry = string | InlineMcpServer

/**
 * The same rule as `@dsh/mcp`'s server names (the middle of `mcp__<server>__<tool>`): letters,
 * digits, `-` and single `_`, at most 32. Kept here so reading definitions never loads the MCP SDK.
 */
const SERVER_NAME = /^[A-Za-z0-9-]+(?:_[A-Za-z0-9-]+)*$/

const STDIO_KEYS = ['command', 'args', 'env', 'cwd', 'type', 'readOnlyHints']
const HTTP_KEYS = ['type', 'url', 'headers', 'readOnlyHints']

/** The names an `mcpServers:` list gives its child, in order. */
export function mcpServerNames(entries: readonly McpServerEntry[] | undefined): string[] {
  return (entries ?? []).map((entry) => (typeof entry === 'string' ? entry : entry.name))
}

/** Check `value` (the field's YAML) and return its entries; `fail` throws the one-line error. */
export function parseMcpServers(value: unknown, fail: (message: string) => never): McpServerEntry[] {
  const example = 'mcpServers: [github, { docs: { command: npx, args: [-y, some-server] } }]'
  if (!Array.isArray(value)) fail(`mcpServers must be a list of server names or inline servers (${example})`)
  const entries: McpServerEntry[] = []
  const seen = new Set<string>()
  const named = (name: string) => {
    if (!SERVER_NAME.test(name) || name.length > 32) fail(`mcpServers: ${JSON.stringify(printable(name))} is not a server name: use letters, digits, "-" and single "_" (at most 32), since its tools are named mcp__<server>__<tool>`)
    if (seen.has(name)) fail(`mcpServers names "${name}" twice`)
    seen.add(name)
  }
  for (const item of value as unknown[]) {
    if (typeof item === 'string') {
      named(item)
      entries.push(item)
      continue
    }
    if (!isRecord(item) || Object.keys(item).length !== 1) fail(`mcpServers: each entry is a server name or a mapping of one name to its server (${example})`)
    const [name, config] = Object.entries(item as Record<string, unknown>)[0]!
    named(name)
    entries.push({ name, config: inlineServerConfig(name, config, fail) })
  }
  return entries
}

function inlineServerConfig(name: string, raw: unknown, fail: (message: string) => never): Record<string, unknown> {
  const bad = (why: string): never => fail(`mcpServers: server "${name}": ${why}`)
  if (!isRecord(raw)) bad('must be a mapping with "command" (stdio) or "type: http" and "url"')
  const config = raw as Record<string, unknown>
  const http = config.type === 'http' || (config.type === undefined && config.url !== undefined && config.command === undefined)
  if (config.type !== undefined && config.type !== 'http' && config.type !== 'stdio') bad(`"type" ${JSON.stringify(printable(String(config.type)))} is not supported (stdio or http)`)
  const keys = http ? HTTP_KEYS : STDIO_KEYS
  for (const key of Object.keys(config)) if (!keys.includes(key)) bad(`unknown key "${printable(key)}" (${http ? 'an http server takes type, url, headers, readOnlyHints' : 'a stdio server takes command, args, env, cwd, readOnlyHints'})`)
  if (config.readOnlyHints !== undefined && typeof config.readOnlyHints !== 'boolean') bad('"readOnlyHints" must be true or false')
  const strings = (key: string) => {
    const value = config[key]
    if (value !== undefined && (!isRecord(value) || !Object.values(value).every((v) => typeof v === 'string'))) bad(`"${key}" must map names to strings`)
  }
  if (http) {
    if (typeof config.url !== 'string' || !/^https?:\/\//.test(config.url)) bad('an http server needs a "url" starting http:// or https://')
    strings('headers')
  } else {
    if (typeof config.command !== 'string' || config.command === '') bad('a stdio server needs a "command"')
    if (config.args !== undefined && (!Array.isArray(config.args) || !config.args.every((arg) => typeof arg === 'string'))) bad('"args" must be a list of strings')
    if (config.cwd !== undefined && typeof config.cwd !== 'string') bad('"cwd" must be a string')
    strings('env')
  }
  return config
}
