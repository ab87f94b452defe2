/**
 * The MCP servers an ACP client sends with `session/new` or `session/load`: checked at the
 * boundary (a bad entry is a JSON-RPC error naming its field, before anything is created),
 * then started for that one session through `@dsh/mcp`'s `ScopedServers`: their tools are the
 * session agent's alone (`mcp__<name>__<tool>`), every call goes to the approval broker (a
 * server's `readOnlyHint` is the client's claim, never trusted), and they stop when the
 * session does. `@dsh/mcp` and the MCP SDK load only when a client sends a server.
 */
import { RequestError, type McpServer } from '@agentclientprotocol/sdk'
import { errorMessage, isRecord } from '@dsh/base'
import type { ScopedServers, ServerSpec } from '@dsh/mcp'

/** A header or variable name: no `=`, no NUL, no line break (it would not survive an environment or a request). */
const PAIR_NAME = /^[^=\0\r\n]+$/

/**
 * Check `servers` (the request's `mcpServers`) and make them `@dsh/mcp` server specs, each
 * started in `cwd` (the session's). Throws `-32602` naming the field (`mcpServers[1].command`)
 * for what no server could be started from: not a list, a missing or unusable name, two
 * entries with one name, no command, an `sse` server (this agent advertises none), a URL that
 * is not http(s), variables or headers that are not `{ name, value }` strings.
 */
export async function readSessionServers(servers: unknown, cwd: string, method: string): Promise<ServerSpec[]> {
  if (servers === undefined || (Array.isArray(servers) && servers.length === 0)) return []
  const bad = (field: string, why: string) => RequestError.invalidParams({ field }, `${method}: ${field} ${why}`)
  if (!Array.isArray(servers)) throw bad('mcpServers', 'must be a list of MCP servers')
  const mcp = await import('@dsh/mcp')
  const specs: ServerSpec[] = []
  const seen = new Map<string, number>()
  for (const [index, entry] of (servers as unknown[]).entries()) {
    const at = `mcpServers[${index}]`
    if (!isRecord(entry)) throw bad(at, 'must be an object: { name, command, args, env } or { type: "http", name, url, headers }')
    if (typeof entry.name !== 'string') throw bad(`${at}.name`, 'is missing')
    const nameProblem = mcp.serverNameProblem(entry.name)
    if (nameProblem) throw bad(`${at}.name`, `is not usable: ${nameProblem}`)
    const first = seen.get(entry.name)
    if (first !== undefined) throw bad(`${at}.name`, `repeats "${entry.name}", the name of mcpServers[${first}]; tools are named mcp__<server>__<tool>, so each server needs a name of its own`)
    seen.set(entry.name, index)
    const raw = rawServerConfig(entry as Partial<McpServer> & Record<string, unknown>, at, cwd, bad)
    try {
      specs.push({ name: entry.name, config: mcp.parseServerConfig(raw, at), from: `the ACP client (${method})` })
    } catch (error) {
      throw RequestError.invalidParams({ field: at }, `${method}: ${errorMessage(error)}`)
    }
  }
  return specs
}

/** The entry in `@dsh/mcp`'s config form (`env` and `headers` as records), its ACP-only fields checked. */
function rawServerConfig(entry: Record<string, unknown>, at: string, cwd: string, bad: (field: string, why: string) => RequestError): Record<string, unknown> {
  const { type } = entry
  if (type === 'sse') throw bad(`${at}.type`, 'is "sse", which this agent does not take (it advertises mcpCapabilities.sse: false); use an http (Streamable HTTP) or stdio server')
  if (type === 'http') {
    if (typeof entry.url !== 'string') throw bad(`${at}.url`, 'is missing')
    return { type: 'http', url: entry.url, headers: pairs(entry.headers, `${at}.headers`, bad) }
  }
  if (type !== undefined && type !== 'stdio') throw bad(`${at}.type`, `${JSON.stringify(type)} is not supported (stdio, or "http")`)
  if (typeof entry.command !== 'string' || entry.command === '') throw bad(`${at}.command`, 'is missing: a stdio server needs the program to run')
  const args = entry.args ?? []
  if (!Array.isArray(args) || !args.every((arg) => typeof arg === 'string')) throw bad(`${at}.args`, 'must be a list of strings')
  // ACP gives a stdio server no directory: it runs in the session's.
  return { command: entry.command, args, env: pairs(entry.env, `${at}.env`, bad), cwd }
}

/** ACP's `[{ name, value }]` as a record; a name given twice, or not a usable name, is refused. */
function pairs(list: unknown, field: string, bad: (field: string, why: string) => RequestError): Record<string, string> {
  if (list === undefined) return {}
  if (!Array.isArray(list)) throw bad(field, 'must be a list of { name, value }')
  const record: Record<string, string> = {}
  for (const [index, pair] of (list as unknown[]).entries()) {
    if (!isRecord(pair) || typeof pair.name !== 'string' || typeof pair.value !== 'string') throw bad(`${field}[${index}]`, 'must be { name, value } with two strings')
    if (!PAIR_NAME.test(pair.name)) throw bad(`${field}[${index}].name`, 'is not a usable name (empty, or with "=", NUL or a line break)')
    if (Object.hasOwn(record, pair.name)) throw bad(`${field}[${index}].name`, `repeats ${JSON.stringify(pair.name)}`)
    record[pair.name] = pair.value
  }
  return record
}

/**
 * Start `specs` for one session; a server that does not start is one warning (naming it and
 * why, never a value of its entry) and the session goes on without its tools.
 */
export async function startSessionServers(specs: readonly ServerSpec[], warn: (line: string) => void): Promise<ScopedServers | undefined> {
  if (specs.length === 0) return undefined
  const { ScopedServers } = await import('@dsh/mcp')
  return ScopedServers.start(specs, { env: process.env, warn })
}
