/**
 * What `dsh mcp list` shows: each configured server started as the plugin would start it
 * (the same environment, the same one deadline), its tools listed, then stopped. Nothing
 * is registered and no tool is called.
 */
import { errorMessage } from '@dsh/base'
import type { ServerSpec } from './config.js'
import { ServerConnection } from './connection.js'
import { mcpToolName, toolNameProblem } from './names.js'

export interface InspectedTool {
  /** The server's own name for it. */
  name: string
  /** What an agent calls it: `mcp__<server>__<tool>`. */
  fullName: string
  description?: string
  /** The server says it only reads (trusted only where the user's entry has `readOnlyHints: true`). */
  readOnlyHint: boolean
  /** Why agents are not offered it (a name model APIs refuse). */
  skipped?: string
}

export interface InspectedServer {
  name: string
  /** Where it was configured: `the mcp entry`, or a project's `.mcp.json`. */
  from: string
  transport: 'stdio' | 'http'
  /** The command and its arguments, or the URL (never headers or environment values: they may hold keys). */
  target: string
  state: 'ready' | 'failed'
  /** Why it did not start (`failed`), one line naming it. */
  error?: string
  tools: InspectedTool[]
}

/** Start each server (in parallel, each within `startTimeoutMs`), list its tools, stop it. Never rejects. */
export async function inspectServers(specs: readonly ServerSpec[], options: { env: NodeJS.ProcessEnv; startTimeoutMs: number }): Promise<InspectedServer[]> {
  return Promise.all(
    specs.map(async (spec): Promise<InspectedServer> => {
      const { config } = spec
      const about = 'url' in config ? { transport: 'http' as const, target: config.url } : { transport: 'stdio' as const, target: [config.command, ...(config.args ?? [])].join(' ') }
      try {
        const connection = await ServerConnection.connect(spec, { env: options.env, startTimeoutMs: options.startTimeoutMs, expand: spec.from === 'the mcp entry' })
        const tools = connection.tools.map((tool) => ({ name: tool.name, fullName: mcpToolName(spec.name, tool.name), ...(tool.description !== undefined && { description: tool.description }), readOnlyHint: tool.annotations?.readOnlyHint === true, ...skippedOf(spec.name, tool.name) }))
        await connection.close()
        return { name: spec.name, from: spec.from, ...about, state: 'ready', tools }
      } catch (error) {
        return { name: spec.name, from: spec.from, ...about, state: 'failed', error: errorMessage(error), tools: [] }
      }
    }),
  )
}

function skippedOf(server: string, tool: string): { skipped?: string } {
  const problem = toolNameProblem(server, tool)
  return problem === undefined ? {} : { skipped: problem }
}
