import type { Context } from 'cordis'
import Schema from 'schemastery'
import { errorMessage, isAbortError, PERMISSION_RULE, ruleToolMatches, type PermissionLevel } from '@dsh/base'
import type { ToolExecution, ToolOutput } from '@dsh/tools'
import type { Tool } from '@modelcontextprotocol/sdk/types.js'
import { serversOf } from './config.js'
import { ServerConnection } from './connection.js'
import { RestartingServer } from './restart.js'
import { mcpToolName, toolNameProblem } from './names.js'
import { renderResult } from './results.js'
import { helperServerSpecs, mayExpand, McpServerTable, type HelperDefinition } from './helper-servers.js'

export interface McpConfig {
  servers: Record<string, unknown>
  projectMcpJson: boolean
  projectHelperServers: boolean
  startTimeoutMs: number
  callTimeoutMs: number
  maxOutputChars: number
}

export const name = 'mcp'
export const inject = ['tools']

export const Config: Schema<McpConfig> = Schema.object({
  servers: Schema.dict(Schema.any()).default({}).description('MCP servers by name: { command, args?, env?, cwd? } (stdio) or { type: http, url, headers? }. ${NAME} in env and header values reads dsh\'s environment.'),
  projectMcpJson: Schema.boolean().default(false).description('Also start the servers of ./.mcp.json (Claude Code\'s format). Off by default: a project file starts programs.'),
  projectHelperServers: Schema.boolean().default(false).description("Also start the inline MCP servers of a project's helper definitions (./.dsh/agents, ./.claude/agents). Off by default: a project file starts programs."),
  // Under the composition's own 10 s start bound, so a slow server is this plugin's warning, not a failed start.
  startTimeoutMs: Schema.natural().min(1).max(9_000).default(5_000).description('Bound on starting a server and listing its tools; a server past it is left out with a warning.'),
  callTimeoutMs: Schema.natural().min(1).default(120_000).description('A tool call without an answer after this ends as an error.'),
  maxOutputChars: Schema.natural().min(256).default(30_000).description('Largest result shown to the model (its start and end kept).'),
})

/**
 * The MCP client. At start every configured server is started and its tools listed, in
 * parallel, each bounded by `startTimeoutMs` (the model's tool list must be known before the
 * first request); a server that fails is one warning naming it, and its tools are absent.
 * Each tool is registered for every agent of the process as `mcp__<server>__<tool>`, with
 * the server's input schema; one whose annotations say `readOnlyHint: true` runs unasked,
 * every other one is `sideEffecting`, so the approval broker decides each call with the
 * tool's name and its arguments as subject. Servers stop when the plugin does (at exit).
 */
export async function apply(ctx: Context, config: McpConfig): Promise<() => Promise<void>> {
  const logger = ctx.logger('mcp')
  const warn = (line: string) => logger.warn(line)
  const configured = serversOf(config, process.cwd(), warn)
  // The definitions plugin is composed in the same synchronous pass as this one, possibly
  // after it: one turn later it is there whatever the order of the entries.
  await new Promise((resolve) => setImmediate(resolve))
  const definitions: readonly HelperDefinition[] = ctx.get('agentDefinitions')?.list() ?? []
  const specs = [...configured, ...helperServerSpecs(definitions, configured, config.projectHelperServers, warn)]
  ctx.plugin(McpServerTable, { specs: specs.map((spec) => ({ spec, expand: mayExpand(spec, definitions) })), env: process.env })
  const servers: RestartingServer[] = []
  const stopAll = async () => {
    await Promise.all(servers.map((server) => server.close()))
  }
  const options = (spec: (typeof specs)[number]) => ({ env: process.env, startTimeoutMs: config.startTimeoutMs, expand: mayExpand(spec, definitions) })
  const restrictive = restrictiveLevels(ctx, definitions)
  const started = await Promise.allSettled(specs.map((spec) => ServerConnection.connect(spec, options(spec))))
  for (const [index, outcome] of started.entries()) {
    if (outcome.status === 'rejected') {
      warn(`${errorMessage(outcome.reason)}; its tools are left out`)
      continue
    }
    const connection = outcome.value
    const spec = specs[index]!
    const server = new RestartingServer(connection, spec, options(spec), warn)
    servers.push(server)
    for (const tool of connection.tools) registerTool(ctx, server, connection.readOnlyHints, tool, config, warn, restrictive)
    if (connection.tools.length === 0) warn(`MCP server "${spec.name}" lists no tools`)
  }
  return stopAll
}

/**
 * The levels whose deny and ask rules a read-only hint may not skip: the broker's own (the
 * user's config) and every helper definition's `permissions`. A rule there naming a tool is
 * the user's word about that tool, and outweighs its server's word that it only reads.
 */
function restrictiveLevels(ctx: Context, definitions: readonly HelperDefinition[]): PermissionLevel[] {
  const approvals = ctx.get('approvals') as { ownLevels?: readonly PermissionLevel[] } | undefined
  return [...(approvals?.ownLevels ?? []), ...definitions.flatMap((definition) => (definition.permissions !== undefined ? [definition.permissions] : []))]
}

/**
 * The deny or ask rule of `levels` that names the tool `name` by name, by a prefix
 * (`mcp__srv__*`) or by its server (`mcp__srv`), or `undefined`. A bare `*` names no tool
 * in particular: it leaves read-only tools read-only, as it does `read`.
 */
export function restrictiveRuleNaming(levels: readonly PermissionLevel[], name: string): string | undefined {
  for (const level of levels) {
    for (const rule of [...(level.deny ?? []), ...(level.ask ?? [])]) {
      const ruleTool = PERMISSION_RULE.exec(rule)?.[1]
      if (ruleTool !== undefined && ruleTool !== '*' && ruleToolMatches(ruleTool, name)) return rule
    }
  }
  return undefined
}

export function registerTool(ctx: Context, server: RestartingServer, readOnlyHints: boolean, tool: Tool, config: McpConfig, warn: (line: string) => void, restrictive: readonly PermissionLevel[] = []): void {
  const problem = toolNameProblem(server.name, tool.name)
  if (problem) return warn(`MCP server "${server.name}": tool skipped: ${problem}`)
  const name = mcpToolName(server.name, tool.name)
  // The registry knows draft-07 only; MCP schemas often name 2020-12, whose keywords a tool's inputs rarely need.
  const { $schema: _dialect, ...parameters } = tool.inputSchema as Record<string, unknown>
  // A server's word that a tool only reads is trusted only where the user's own config says
  // so (readOnlyHints: true on that server): such a tool then skips the broker as reads do,
  // so no rule or prompt sees it. Without that, and always for a project's .mcp.json, every
  // call is decided by the approval broker (a deny rule on it holds). A deny or ask rule
  // naming the tool wins over the hint: the tool is then decided by the broker too.
  const readOnly = tool.annotations?.readOnlyHint === true && readOnlyHints && restrictiveRuleNaming(restrictive, name) === undefined
  try {
    ctx.tools.register<Record<string, unknown>>({
      name,
      description: tool.description ?? tool.title ?? `${tool.name} of the MCP server ${server.name}`,
      parameters,
      concurrencySafe: readOnly,
      sideEffecting: !readOnly,
      execute: (args, exec) => callTool(server, tool.name, args, exec, config),
    })
  } catch (error) {
    warn(`MCP server "${server.name}": tool ${name} skipped: ${errorMessage(error)}`)
  }
}

async function callTool(server: RestartingServer, tool: string, args: Record<string, unknown>, exec: ToolExecution, config: McpConfig): Promise<ToolOutput> {
  try {
    return renderResult(await server.call(tool, args ?? {}, config.callTimeoutMs, exec.signal), config.maxOutputChars)
  } catch (error) {
    if (exec.signal.aborted || isAbortError(error)) throw error
    return { isError: true, content: errorMessage(error) }
  }
}

export default { name, inject, Config, apply }
