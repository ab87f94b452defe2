/**
 * What `dsh mcp serve` offers: the general `delegate` tool and one tool per helper
 * definition a call can run as (a provider that makes its child here, with a persona:
 * spawn, fork; the served agent becomes the helper, as an A2A skill does). Each takes
 * `{ prompt }` and nothing else, so a client's mistake is refused naming the argument.
 */
import type { Context } from 'cordis'
import type { AgentDefinition } from '@dsh/agent-definitions'
import type { Tool } from '@modelcontextprotocol/sdk/types.js'
import type {} from '@dsh/subagent'

/** The general tool: a plain dsh session, no helper. */
export const DELEGATE_TOOL = 'delegate'

/** The longest prompt a call may carry, in characters (as `dsh a2a serve`'s tasks). */
export const MAX_PROMPT_CHARS = 64_000

/** What MCP clients accept as a tool name. */
const TOOL_NAME = /^[A-Za-z0-9_.-]{1,128}$/

export interface ServedTool {
  /** The MCP tool as `tools/list` shows it. */
  tool: Tool
  /** The helper a call runs as; none for `delegate`. */
  helper?: AgentDefinition
}

/** The tools of `ctx`: `delegate`, then each helper a call can run as; `warn` hears each helper left out and why. */
export function servedTools(ctx: Context, warn: (line: string) => void): Map<string, ServedTool> {
  const tools = new Map<string, ServedTool>([[DELEGATE_TOOL, { tool: toolOf(DELEGATE_TOOL, 'Delegate a task to a dsh agent: it works on the prompt (with its tools, and helpers of its own) and answers with the result.') }]])
  const subagents = ctx.get('subagents')
  for (const helper of ctx.get('agentDefinitions')?.list() ?? []) {
    // The call's session becomes the helper: only a provider that runs its child here, with a persona, fits.
    if (subagents?.getProvider(helper.provider)?.capabilities.persona !== true) {
      warn(`helper "${helper.name}" is not offered as an MCP tool: its provider "${helper.provider}" runs its child elsewhere (only helpers of spawn or fork are served)`)
      continue
    }
    if (!TOOL_NAME.test(helper.name)) {
      warn(`helper "${helper.name}" is not offered as an MCP tool: its name is not one MCP clients accept (letters, digits, "_", "-", ".", at most 128)`)
      continue
    }
    if (tools.has(helper.name)) {
      warn(`helper "${helper.name}" is not offered as an MCP tool: "${DELEGATE_TOOL}" is the general tool's name; rename the helper`)
      continue
    }
    tools.set(helper.name, { tool: toolOf(helper.name, helper.description), helper })
  }
  return tools
}

function toolOf(name: string, description: string): Tool {
  return {
    name,
    description,
    inputSchema: {
      type: 'object',
      properties: { prompt: { type: 'string', minLength: 1, maxLength: MAX_PROMPT_CHARS, description: 'What the agent is to do: the whole task, with the context it needs.' } },
      required: ['prompt'],
      additionalProperties: false,
    },
    annotations: { title: name, readOnlyHint: false, openWorldHint: true },
  }
}

/** The prompt of a call's arguments, or why they are refused (one line naming the argument). */
export function promptOf(tool: string, args: Record<string, unknown> | undefined): { prompt: string } | { problem: string } {
  const given = args ?? {}
  const unknown = Object.keys(given).filter((key) => key !== 'prompt')
  if (unknown.length > 0) return { problem: `${tool}: unknown argument${unknown.length > 1 ? 's' : ''} ${unknown.map((key) => JSON.stringify(key.slice(0, 64))).join(', ')}; the only argument is "prompt"` }
  const { prompt } = given
  if (typeof prompt !== 'string' || prompt.trim() === '') return { problem: `${tool}: the argument "prompt" must be a non-empty string (got ${prompt === undefined ? 'nothing' : typeof prompt})` }
  if (prompt.length > MAX_PROMPT_CHARS) return { problem: `${tool}: the argument "prompt" has ${prompt.length} characters, more than this server accepts (${MAX_PROMPT_CHARS})` }
  return { prompt }
}
