/**
 * `dsh mcp list [--json] [--config FILE]`: the MCP servers the config's `@dsh/mcp` entry
 * names (and, with its `projectMcpJson`, `./.mcp.json`'s), read from the same config a run
 * composes (`chooseConfig`: an untrusted `./dsh.yml` is refused, as everywhere), each started
 * as a run would start it, within its one `startTimeoutMs`, its tools listed, then stopped.
 * The helpers' own inline servers (`mcpServers:` of their definitions) are listed too, each
 * `from` its file. Nothing else of the composition is started. Exit 0 when every server started, 1 when
 * one did not (each says why), 0 with a line saying so when none is configured.
 */
import { errorMessage, printable } from '@dsh/base'
import { parseVerbArgs } from '../args.js'
import { chooseConfig, chosenFile } from '../config-file.js'
import { parseEntries, readEntries } from '../config-entries.js'
import { CompositionError, UsageError } from '../errors.js'
import type { PluginEntry } from '../config-entries.js'
import type { AgentDefinition } from '@dsh/agent-definitions'
import { DEFINITIONS_PLUGIN } from '../agent-definitions.js'

const MCP_ENTRY = '@dsh/mcp'

export async function mcpListVerb(args: string[]): Promise<number> {
  const { values } = parseVerbArgs('mcp list', { args, allowPositionals: false, options: { json: { type: 'boolean', default: false }, config: { type: 'string' } } })
  const choice = chooseConfig({ config: values.config })
  if (choice.kind === 'untrusted') throw new CompositionError('CONFIG_UNTRUSTED', choice.refusal)
  const file = chosenFile(choice)
  const entries = choice.kind === 'project' ? parseEntries(choice.text, choice.file) : file !== undefined ? await readEntries(file) : []
  const mcpEntries = entries.filter((entry) => entry.name === MCP_ENTRY && entry.disabled !== true)
  const { Config, helperServerSpecs, inspectServers, serversOf } = await import('@dsh/mcp')
  const warnings: string[] = []
  const servers = []
  const definitions = await helperDefinitions(entries, warnings)
  // The helpers' inline servers start with the MCP client a run composes for them (mcp-entries.ts), under its defaults when the config has no entry.
  for (const entry of mcpEntries.length > 0 ? mcpEntries : definitions.length > 0 ? [{ id: 'mcp', name: MCP_ENTRY }] : []) {
    let config
    try {
      config = Config((entry.config ?? {}) as unknown as Parameters<typeof Config>[0])
      const configured = serversOf(config, process.cwd(), (line) => warnings.push(line))
      const specs = [...configured, ...helperServerSpecs(definitions, configured, config.projectHelperServers, (line) => warnings.push(line))]
      servers.push(...(await inspectServers(specs, { env: process.env, startTimeoutMs: config.startTimeoutMs })))
    } catch (error) {
      throw new UsageError('USAGE', `dsh mcp list: config ${file ?? ''}: entry ${entry.id} (${MCP_ENTRY}): ${errorMessage(error)}`, { cause: error })
    }
  }
  const failed = servers.filter((server) => server.state === 'failed').length
  if (values.json) {
    process.stdout.write(`${JSON.stringify({ config: file ?? null, servers, warnings }, null, 2)}\n`)
    return failed > 0 ? 1 : 0
  }
  for (const line of warnings) process.stderr.write(`dsh mcp list: ${line}\n`)
  if (servers.length === 0) {
    process.stdout.write(`no MCP servers are configured${file ? ` in ${file}` : ' (no config file)'}: a ${MCP_ENTRY} entry with servers: adds them (packages/mcp/mcp/README.md)\n`)
    return 0
  }
  for (const server of servers) {
    const where = server.from === 'the mcp entry' ? '' : ` (from ${server.from})`
    process.stdout.write(`${server.name}${where}: ${server.transport} ${printable(server.target)}\n`)
    if (server.state === 'failed') {
      process.stdout.write(`  failed: ${printable(server.error ?? 'unknown')}\n`)
      continue
    }
    process.stdout.write(`  ready, ${server.tools.length} tool${server.tools.length === 1 ? '' : 's'}\n`)
    for (const tool of server.tools) {
      const about = tool.skipped ?? (tool.description ? printable(tool.description.split('\n')[0]!).slice(0, 100) : '')
      process.stdout.write(`    ${printable(tool.fullName)}${tool.readOnlyHint ? ' (read-only hint)' : ''}${about ? `  ${about}` : ''}\n`)
    }
  }
  return failed > 0 ? 1 : 0
}

/**
 * The helper definitions a run with this config reads (`@dsh/agent-definitions`' directories,
 * as its entry configures them), when some name MCP servers; none when none does.
 */
async function helperDefinitions(entries: readonly PluginEntry[], warnings: string[]): Promise<readonly AgentDefinition[]> {
  const entry = entries.find((candidate) => candidate.name === DEFINITIONS_PLUGIN)
  if (entry?.disabled === true) return []
  const config = entry?.config ?? {}
  const { loadDefinitions } = await import('@dsh/agent-definitions')
  let set
  try {
    set = loadDefinitions({
    ...(typeof config.project === 'boolean' && { project: config.project }),
    ...(typeof config.user === 'boolean' && { user: config.user }),
    ...(typeof config.claudeCode === 'boolean' && { claudeCode: config.claudeCode }),
    ...(Array.isArray(config.dirs) && { dirs: config.dirs.filter((dir): dir is string => typeof dir === 'string') }),
    })
  } catch (error) {
    // dsh run refuses such a definition, naming it; here it only keeps the helpers' servers out.
    warnings.push(`the helpers' servers are not listed: ${errorMessage(error)}`)
    return []
  }
  return set.definitions.some((definition) => (definition.mcpServers?.length ?? 0) > 0) ? set.definitions : []
}
