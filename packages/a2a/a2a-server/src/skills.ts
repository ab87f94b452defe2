/**
 * Agent definitions as A2A skills: each helper the worker can run as a task's session (one
 * whose provider makes its child here, with a persona: spawn, fork) is a skill of the
 * card, id = the helper's name, and a message whose `metadata.skill` names it runs the
 * task as that helper (its instructions, model, tool list and depth bound). Without
 * `metadata.skill`, or with `dsh-prompt`, a task is a plain dsh session as before.
 */
import type { AgentSkill } from '@a2a-js/sdk'
import { isRecord } from '@dsh/base'
import type { AgentDefinition } from '@dsh/agent-definitions'
import type { Context } from 'cordis'
import type {} from '@dsh/subagent'

/** The skill every worker has: the text is the task. */
export const PROMPT_SKILL = 'dsh-prompt'

/** The helpers of `ctx.agentDefinitions` a task can run as, by name (none without the plugin). */
export function skillHelpers(ctx: Context): ReadonlyMap<string, AgentDefinition> {
  const definitions = ctx.get('agentDefinitions')?.list() ?? []
  const subagents = ctx.get('subagents')
  // A task's session becomes the helper: only a provider that runs its child here, with a persona, fits.
  return new Map(definitions.filter((definition) => subagents?.getProvider(definition.provider)?.capabilities.persona === true).map((definition) => [definition.name, definition]))
}

export function helperSkill(definition: AgentDefinition): AgentSkill {
  return { id: definition.name, name: definition.name, description: definition.description, tags: ['dsh', 'helper'], examples: [], inputModes: ['text/plain'], outputModes: ['text/plain'], securityRequirements: [] }
}

/** The skill a message asks for (`metadata.skill`), or undefined for none. */
export function requestedSkill(metadata: unknown): string | undefined {
  if (!isRecord(metadata)) return undefined
  const skill = metadata.skill
  return typeof skill === 'string' && skill !== PROMPT_SKILL ? skill : undefined
}
