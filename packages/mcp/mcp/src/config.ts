/**
 * What servers the plugin connects to: its `servers` entry, and a project's `.mcp.json`
 * (Claude Code's format) only when the user's own config says `projectMcpJson: true`.
 */
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { isRecord } from '@dsh/base'
import { McpError } from './errors.js'

export interface StdioServerConfig {
  command: string
  args?: string[]
  /** Variables given to the server, on top of the allow-listed base environment. */
  env?: Record<string, string>
  cwd?: string
  /** Trust the server's `readOnlyHint`: such tools run unasked, as reads do (user config only). */
  readOnlyHints?: boolean
}

export interface HttpServerConfig {
  type: 'http'
  url: string
  /** Request headers; `${NAME}` in a value (user config only) is the variable NAME of dsh's environment. */
  headers?: Record<string, string>
  /** Trust the server's `readOnlyHint`: such tools run unasked, as reads do (user config only). */
  readOnlyHints?: boolean
}

export type ServerConfig = StdioServerConfig | HttpServerConfig

/** A server to connect to, with where it was configured (named in every warning). */
export interface ServerSpec {
  name: string
  config: ServerConfig
  from: string
}

/**
 * A server's name is the middle of `mcp__<server>__<tool>`: letters, digits, `-` and single
 * `_`, so the name a tool is called by says unambiguously which server serves it.
 */
const SERVER_NAME = /^[A-Za-z0-9-]+(?:_[A-Za-z0-9-]+)*$/

export function serverNameProblem(name: string): string | undefined {
  if (SERVER_NAME.test(name) && name.length <= 32) return undefined
  return `server name ${JSON.stringify(name)} is not usable: use letters, digits, "-" and single "_" (at most 32 characters), since tools are named mcp__<server>__<tool>`
}

/** Check one server entry's shape; `where` names it in the error. */
export function parseServerConfig(raw: unknown, where: string): ServerConfig {
  const bad = (why: string) => new McpError('INVALID_CONFIG', `${where}: ${why}`)
  if (!isRecord(raw)) throw bad('a server must be a mapping with "command" (stdio) or "type: http" and "url"')
  const strings = (value: unknown, key: string): Record<string, string> | undefined => {
    if (value === undefined) return undefined
    if (!isRecord(value) || !Object.values(value).every((v) => typeof v === 'string')) throw bad(`"${key}" must map names to strings`)
    return value as Record<string, string>
  }
  if (raw.readOnlyHints !== undefined && typeof raw.readOnlyHints !== 'boolean') throw bad('"readOnlyHints" must be true or false')
  const trusted = raw.readOnlyHints === true
  const type = raw.type
  if (type === 'http' || (type === undefined && typeof raw.url === 'string' && raw.command === undefined)) {
    if (typeof raw.url !== 'string') throw bad('an http server needs a "url"')
    let url: URL
    try {
      url = new URL(raw.url)
    } catch {
      throw bad(`"url" ${JSON.stringify(raw.url)} is not a URL`)
    }
    if (url.protocol !== 'http:' && url.protocol !== 'https:') throw bad(`"url" must be http: or https:, not ${url.protocol}`)
    const headers = strings(raw.headers, 'headers')
    return { type: 'http', url: raw.url, ...(headers && { headers }), ...(trusted && { readOnlyHints: true }) }
  }
  if (type !== undefined && type !== 'stdio') throw bad(`"type" ${JSON.stringify(type)} is not supported (stdio or http)`)
  if (typeof raw.command !== 'string' || raw.command === '') throw bad('a stdio server needs a "command"')
  if (raw.args !== undefined && (!Array.isArray(raw.args) || !raw.args.every((arg) => typeof arg === 'string'))) throw bad('"args" must be a list of strings')
  if (raw.cwd !== undefined && typeof raw.cwd !== 'string') throw bad('"cwd" must be a string')
  const env = strings(raw.env, 'env')
  return { command: raw.command, ...(raw.args !== undefined && { args: raw.args as string[] }), ...(env && { env }), ...(typeof raw.cwd === 'string' && { cwd: raw.cwd }), ...(trusted && { readOnlyHints: true }) }
}

/** The servers of the plugin's own `servers` entry; a bad name or shape is an error (dsh does not start). */
export function configuredServers(servers: Record<string, unknown>, from: string): ServerSpec[] {
  return Object.entries(servers).map(([name, raw]) => {
    const problem = serverNameProblem(name)
    if (problem) throw new McpError('INVALID_CONFIG', `${from}: ${problem}`)
    return { name, config: parseServerConfig(raw, `${from}: servers.${name}`), from }
  })
}

/**
 * The servers of `<cwd>/.mcp.json`, read only when the user asked for it. The file is the
 * project's, not the user's: it may start programs (that is why it is opt-in), but it never
 * reads dsh's environment (`${NAME}` stays literal, so a cloned file cannot send the
 * user's keys to a server of its choosing). A server it cannot describe is a warning, not
 * a failed start. No file: no servers.
 */
export function projectServers(cwd: string, warn: (line: string) => void): ServerSpec[] {
  const file = join(cwd, '.mcp.json')
  let text: string
  try {
    text = readFileSync(file, 'utf8')
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return []
    throw new McpError('PROJECT_FILE', `cannot read ${file}: ${(error as Error).message}`)
  }
  let parsed: unknown
  try {
    parsed = JSON.parse(text)
  } catch (error) {
    throw new McpError('PROJECT_FILE', `${file} is not valid JSON: ${(error as Error).message}`)
  }
  if (!isRecord(parsed) || !isRecord(parsed.mcpServers)) throw new McpError('PROJECT_FILE', `${file}: expected { "mcpServers": { name: {...} } }`)
  const specs: ServerSpec[] = []
  for (const [name, raw] of Object.entries(parsed.mcpServers)) {
    const problem = serverNameProblem(name)
    if (problem) {
      warn(`${file}: ${problem}; skipped`)
      continue
    }
    try {
      specs.push({ name, config: parseServerConfig(raw, `${file}: mcpServers.${name}`), from: file })
    } catch (error) {
      warn(`${(error as Error).message}; skipped`)
    }
  }
  return specs
}

/** `${NAME}` in `value` replaced by dsh's variable NAME; an unset one is an error naming it. */
export function expandVariables(value: string, env: NodeJS.ProcessEnv, where: string): string {
  return value.replace(/\$\{([A-Za-z_][A-Za-z0-9_]*)\}/g, (_, name: string) => {
    const found = env[name]
    if (found === undefined) throw new McpError('INVALID_CONFIG', `${where} names \${${name}}, which is not set in dsh's environment`)
    return found
  })
}

/**
 * Every server a config names, as the plugin starts them: its `servers` entry, then (with
 * `projectMcpJson`) `<cwd>/.mcp.json`'s, where the user's own entry wins a name both use.
 */
export function serversOf(config: { servers: Record<string, unknown>; projectMcpJson: boolean }, cwd: string, warn: (line: string) => void): ServerSpec[] {
  const specs = configuredServers(config.servers, 'the mcp entry')
  if (!config.projectMcpJson) return specs
  for (const spec of projectServers(cwd, warn)) {
    // The user's own entry wins: a project file never replaces a server the user configured.
    if (specs.some((own) => own.name === spec.name)) warn(`${spec.from}: server "${spec.name}" is also in your config, which wins; the project's is ignored`)
    else specs.push(spec)
  }
  return specs
}
