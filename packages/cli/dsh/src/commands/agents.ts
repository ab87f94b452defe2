/**
 * `dsh agents list | show NAME`: the helpers defined in files, as the composition that
 * `dsh run` would start sees them (the same directories, config and checks).
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { printable } from '@dsh/base'
import type { AgentDefinition } from '@dsh/agent-definitions'
import type {} from '@dsh/skills'
import type {} from '@dsh/mcp'
import { helperDepthBound, helperToolFilter } from '@dsh/tool-subagent'
import { definitionReadiness } from '../agent-definitions.js'
import type { Composition } from '../compose.js'
import { UsageError } from '../errors.js'
import { startRuntime } from '../runtime.js'
import { describe } from './prompt-preview.js'

export interface AgentsOptions {
  config?: string
  model?: string
  sessionDir?: string
  verbose?: boolean
}

export async function agentsCommand(verb: string | undefined, args: readonly string[], options: AgentsOptions): Promise<number> {
  if (verb !== 'list' && verb !== 'show') throw new UsageError('USAGE', 'dsh agents: the verbs are `list` and `show NAME` (dsh agents --help)')
  if (verb === 'list' && args.length > 0) throw new UsageError('USAGE', `dsh agents list: unexpected argument ${JSON.stringify(args[0])}`)
  if (verb === 'show' && args.length !== 1) throw new UsageError('USAGE', 'dsh agents show: name one helper (dsh agents list shows them)')
  // A throwaway session directory: neither verb may add sessions to the user's store.
  const sessionDir = mkdtempSync(join(tmpdir(), 'dsh-agents-'))
  try {
    const runtime = await startRuntime({ ...options, sessionDir })
    try {
      return verb === 'list' ? await list(runtime) : await show(runtime, args[0]!)
    } finally {
      await runtime.dispose()
    }
  } finally {
    rmSync(sessionDir, { recursive: true, force: true })
  }
}

function definitionsOf(runtime: Composition): readonly AgentDefinition[] | undefined {
  return runtime.ctx.get('agentDefinitions')?.list()
}

async function list(runtime: Composition): Promise<number> {
  const service = runtime.ctx.get('agentDefinitions')
  if (!service || service.list().length === 0) {
    process.stdout.write('no agent definitions (put *.md files in ./.dsh/agents or ~/.dsh/agents)\n')
    return 0
  }
  const rows = service.list().map((definition) => [definition.name, definition.provider, definition.model ?? "(parent's)", definition.source.file])
  const widths = [0, 1, 2].map((column) => Math.max(...rows.map((row) => row[column]!.length), ['NAME', 'PROVIDER', 'MODEL'][column]!.length))
  const line = (row: readonly string[]) => row.map((cell, column) => (column < 3 ? cell.padEnd(widths[column]!) : cell)).join('  ')
  const out = [line(['NAME', 'PROVIDER', 'MODEL', 'FILE']), ...rows.map(line), ...service.notes]
  const problems = await definitionReadiness(runtime.ctx)
  for (const problem of problems) out.push(`error: ${problem}`)
  process.stdout.write(printable(`${out.join('\n')}\n`))
  return problems.length > 0 ? 2 : 0
}

/** The composed prompt the helper's child would get, its tools and how the task reaches it. */
async function show(runtime: Composition, name: string): Promise<number> {
  const definition = definitionsOf(runtime)?.find((candidate) => candidate.name === name)
  if (!definition) {
    const names = definitionsOf(runtime)?.map((candidate) => candidate.name) ?? []
    throw new UsageError('USAGE', `dsh agents show: no helper named ${JSON.stringify(name)} (helpers: ${names.join(', ') || 'none'})`)
  }
  const { agents } = runtime.ctx
  const provider = runtime.ctx.get('subagents')?.getProvider(definition.provider)
  // The bound a call would carry: the tighter of the definition's and the helper tool's.
  const helperTool = runtime.entries.find((entry) => entry.name === '@dsh/tool-subagent' && entry.config?.helpers === true)?.config
  const toolMaxDepth = helperTool?.maxDepth
  const maxDepth = provider && helperDepthBound(definition, typeof toolMaxDepth === 'number' ? toolMaxDepth : undefined, provider)
  const lines = [`helper ${definition.name}: ${definition.description}`, `file: ${definition.source.file} (hash ${definition.source.hash})`, `provider: ${definition.provider}${provider ? '' : ' (not registered)'}; model: ${definition.model ?? "the parent's"}; background: ${definition.background}${definition.continuable ? '; continuable' : ''}${definition.timeoutMs !== undefined ? `; timeoutMs: ${definition.timeoutMs}` : ''}${maxDepth !== undefined ? `; maxDepth: ${maxDepth}` : ''}`]
  if (definition.mcpServers !== undefined && definition.mcpServers.length > 0) lines.push(`mcp servers: ${mcpServersLine(runtime, definition.mcpServers)}`)
  if (!provider?.capabilities.persona) {
    // Out of process: the child's prompt is its own; what dsh sends is the task with the instructions at its head.
    lines.push(`provider "${definition.provider}" makes its own system prompt; each task it is given starts with these instructions, then ---, then the task:`, definition.instructions || '(no instructions)')
    process.stdout.write(printable(`${lines.join('\n')}\n`))
    return 0
  }
  const root = await agents.create({ meta: { origin: 'agents-show', cwd: process.cwd() } })
  // The tools a call would give: the definition's under the helper tool's own toolFilter (its ceiling).
  const filter = helperToolFilter(definition, helperTool?.toolFilter as Parameters<typeof helperToolFilter>[1])
  const child = await agents.create({
    parent: root,
    // Named after the helper, as a delegation's child is: what it may use (its skills) follows from that.
    meta: { origin: 'subagent', parentSession: root.id, delegationDepth: 1, cwd: root.session.header.cwd, helper: { name: definition.name, hash: definition.source.hash }, ...(maxDepth !== undefined && { maxDepth }) },
    agentOptions: { ...(definition.instructions !== '' && { persona: definition.instructions }), ...(definition.model !== undefined && { model: definition.model }) },
    ...(filter && { setup: (ctx, agent) => void ctx.tools.restrict(agent.id, filter) }),
  })
  lines.push(`tools: ${runtime.ctx.tools.specsFor(child.id).map((tool) => tool.name).join(', ') || 'none'}`)
  const skills = runtime.ctx.get('skills')
  if (skills && skills.list().length > 0) lines.push(`skills: ${skills.forAgent(child).map((skill) => skill.name).join(', ') || 'none'}`)
  process.stdout.write(printable(`${lines.join('\n')}\n${describe(runtime, child, `system prompt of a "${definition.name}" child (depth 1)`)}`))
  return 0
}

/**
 * A helper's `mcpServers:` as `show` lists them: each name, whether it is the helper's own
 * (inline) or the config's, and whether this process runs it (a project's inline server
 * without projectHelperServers, or a name no config has, is not started).
 */
function mcpServersLine(runtime: Composition, entries: NonNullable<AgentDefinition['mcpServers']>): string {
  const running = new Set(runtime.ctx.get('mcpServers')?.names() ?? [])
  return entries
    .map((entry) => {
      const name = typeof entry === 'string' ? entry : entry.name
      return `${name} (${typeof entry === 'string' ? 'named' : 'inline'}${running.has(name) ? '' : ', not started here'})`
    })
    .join(', ')
}
