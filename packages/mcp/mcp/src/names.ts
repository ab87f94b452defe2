import { mcpToolName } from '@dsh/base'

/** The name an agent calls a server's tool by (one pattern, in `@dsh/base`, which tracing reads back with `mcpServerOf`). */
export { mcpServerOf, mcpToolName } from '@dsh/base'

/** What model APIs accept as a tool name (the registry's rule): letters, digits, `_`, `-`, at most 64. */
const TOOL_NAME = /^[A-Za-z0-9_-]{1,64}$/

/** Why `mcp__<server>__<tool>` cannot be offered to a model, or `undefined` when it can. */
export function toolNameProblem(server: string, tool: string): string | undefined {
  const name = mcpToolName(server, tool)
  if (TOOL_NAME.test(name)) return undefined
  if (name.length > 64) return `${name} is longer than the 64 characters model APIs accept`
  return `${JSON.stringify(tool)} has characters model APIs do not accept in a tool name (letters, digits, "_" and "-" only)`
}
