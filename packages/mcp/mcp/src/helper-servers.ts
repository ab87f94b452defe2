/**
 * The MCP servers of helper definitions (`mcpServers:` of `@dsh/agent-definitions`): the
 * inline servers this process starts for the helpers that define them, and the one table
 * (`ctx.mcpServers`) where a provider whose child is another program (Codex, Claude Code)
 * finds a named server's entry to hand that child. Nothing here loads the MCP SDK.
 */
import { Service, type Context } from 'cordis'
import type { PermissionLevel } from '@dsh/base'
import { expandVariables, parseServerConfig, type ServerConfig, type ServerSpec } from './config.js'

declare module 'cordis' {
  interface Context {
    mcpServers: McpServerTable
  }
}

/**
 * What this package reads of a helper definition (`AgentDefinition` of
 * `@dsh/agent-definitions`, described here so that the MCP client does not depend on it).
 */
export interface HelperDefinition {
  name: string
  mcpServers?: readonly (string | { name: string; config: Readonly<Record<string, unknown>> })[]
  /** Its rules: a deny or ask rule naming an MCP tool outweighs the tool's read-only hint. */
  permissions?: PermissionLevel
  source: { file: string; origin: 'project' | 'claude-code' | 'config' | 'user'; lines: { mcpServers?: number } }
}
/** A project's definition (a repository someone cloned), as `fromProject` of `@dsh/agent-definitions` says. */
const fromProject = (origin: HelperDefinition['source']['origin']) => origin === 'project' || origin === 'claude-code'

const mcpServerNames = (entries: HelperDefinition['mcpServers']) => (entries ?? []).map((entry) => (typeof entry === 'string' ? entry : entry.name))

/** Where a definition's inline server came from, as every warning about it names it. */
const inlineFrom = (definition: HelperDefinition) => `${definition.source.file} (helper ${definition.name})`

/**
 * The inline servers of `definitions`, to be started beside the user's (`configured`). A
 * project's definition (`./.dsh/agents`, `./.claude/agents`: a repository someone cloned) is
 * a command the project brings, so its servers start only with `projectHelperServers: true`
 * in the user's own config; otherwise each is one warning naming the file and what to set.
 * The user's own server wins a name (a warning); two definitions giving one name two
 * different servers keep the first (a warning naming both files). A named server that is
 * in no config is a warning naming the helper, whose child then runs without it.
 */
export function helperServerSpecs(definitions: readonly HelperDefinition[], configured: readonly ServerSpec[], projectHelperServers: boolean, warn: (line: string) => void): ServerSpec[] {
  const specs: ServerSpec[] = []
  const firstFile = new Map<string, { file: string; json: string }>()
  for (const definition of definitions) {
    for (const entry of definition.mcpServers ?? []) {
      if (typeof entry === 'string') continue
      const where = `${definition.source.file}:${definition.source.lines.mcpServers ?? 1}: helper "${definition.name}"`
      if (fromProject(definition.source.origin) && !projectHelperServers) {
        warn(`${where}: its inline MCP server "${entry.name}" is not started, since a project's definition may not start programs unless your config allows it; to run it, set projectHelperServers: true in the @dsh/mcp entry of your own config`)
        continue
      }
      if (configured.some((own) => own.name === entry.name)) {
        warn(`${where}: its inline MCP server "${entry.name}" has the name of a server of your config, which wins; name it alone (mcpServers: [${entry.name}]) or rename it`)
        continue
      }
      const json = JSON.stringify(entry.config)
      const first = firstFile.get(entry.name)
      if (first !== undefined) {
        if (first.json !== json) warn(`${where}: its inline MCP server "${entry.name}" differs from the one of the same name in ${first.file}, which is used; give one of them another name`)
        continue
      }
      firstFile.set(entry.name, { file: definition.source.file, json })
      specs.push({ name: entry.name, config: parseServerConfig(entry.config, `${where}: mcpServers.${entry.name}`), from: inlineFrom(definition) })
    }
  }
  const known = new Set([...configured, ...specs].map((spec) => spec.name))
  for (const definition of definitions) {
    for (const name of mcpServerNames(definition.mcpServers)) {
      if (known.has(name) || definition.mcpServers!.some((entry) => typeof entry !== 'string' && entry.name === name)) continue
      warn(`${definition.source.file}:${definition.source.lines.mcpServers ?? 1}: helper "${definition.name}" names MCP server "${name}", which is not in the servers of your @dsh/mcp entry${configured.length > 0 ? ` (${configured.map((spec) => spec.name).join(', ')})` : ''}; its child runs without it`)
    }
  }
  return specs
}

/** A server as a child program is handed it: its entry with the user's `${NAME}` values read. */
export interface ResolvedServer {
  name: string
  config: ServerConfig
}

/**
 * `ctx.mcpServers`: the servers this process runs (the user's, `.mcp.json`'s with
 * `projectMcpJson`, and the helpers' inline ones it was allowed to start), by name. A
 * provider whose child is another program hands it `resolve(name)`; a name not here (not
 * configured, or a project's server not allowed) resolves to nothing, so no entry reaches a
 * child that this process would not have started itself.
 */
export class McpServerTable extends Service {
  private readonly specs: ReadonlyMap<string, { spec: ServerSpec; expand: boolean }>
  /** dsh's environment, where `${NAME}` of the user's own entries is read. */
  private readonly env: NodeJS.ProcessEnv

  constructor(ctx: Context, config: { specs: readonly { spec: ServerSpec; expand: boolean }[]; env: NodeJS.ProcessEnv }) {
    super(ctx, 'mcpServers')
    this.specs = new Map(config.specs.map((entry) => [entry.spec.name, entry]))
    this.env = config.env
  }

  /** The names of the servers this process runs (configured; one that failed to start included). */
  names(): string[] {
    return [...this.specs.keys()]
  }

  /** The server `name` as a child program should start it (`${NAME}` read where the user's config allows it), or undefined. */
  resolve(name: string): ResolvedServer | undefined {
    const found = this.specs.get(name)
    if (found === undefined) return undefined
    const { spec, expand } = found
    const read = (values: Record<string, string> | undefined, key: string) =>
      values === undefined ? undefined : Object.fromEntries(Object.entries(values).map(([k, v]) => [k, expand ? expandVariables(v, this.env, `${spec.from}: servers.${name}.${key}.${k}`) : v]))
    const config = spec.config
    if ('url' in config) {
      const headers = read(config.headers, 'headers')
      return { name, config: { type: 'http', url: config.url, ...(headers && { headers }) } }
    }
    const env = read(config.env, 'env')
    return { name, config: { command: config.command, ...(config.args && { args: [...config.args] }), ...(env && { env }), ...(config.cwd !== undefined && { cwd: config.cwd }) } }
  }
}

/** Whether `spec` may read dsh's environment in `${NAME}`: the user's own config and the user's own definitions only. */
export function mayExpand(spec: ServerSpec, definitions: readonly HelperDefinition[]): boolean {
  if (spec.from === 'the mcp entry') return true
  const definition = definitions.find((candidate) => inlineFrom(candidate) === spec.from)
  return definition !== undefined && !fromProject(definition.source.origin)
}
