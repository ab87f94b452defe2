import type { Agent } from '@dsh/agent'
import { effectiveMaxDepth } from '@dsh/subagent'

/** Where delegation guidance sits in the system prompt (after persona and environment). */
export const SUBAGENT_SECTION_ORDER = 200

/**
 * The system-prompt guidance for one subagent tool: when to delegate, what the child
 * sees (a fresh child nothing, a forked one the conversation up to the call), parallel delegations in
 * one step, and background runs when the tool offers them.
 */
export function delegationGuidance(toolName: string, inheritsParentContext: boolean, background: 'off' | 'one-shot' | 'continuable'): string {
  const lines = [
    `# Delegating with \`${toolName}\``,
    '- Delegate work that is self-contained and would take many steps or fill your context with detail you will not need again: surveying a codebase, reading many files, an independent investigation or check. Do small or tightly coupled work yourself; delegating it costs more than it saves.',
    inheritsParentContext
      ? `- A \`${toolName}\` child is forked from you: it already sees this conversation up to your call, the current request and the results you have included. Use it when the task depends on what was said or found so far, and tell it only what is new and what to return.`
      : `- A \`${toolName}\` child starts fresh: it sees nothing of this conversation. Use it for tasks that stand on their own, and write its prompt as a complete brief: the goal, the context it needs, the constraints, and exactly what to return.`,
    `- Independent delegations belong in one step: call \`${toolName}\` several times in the same response and the children run in parallel. Delegate one after another only when a later task needs an earlier answer.`,
  ]
  if (background === 'one-shot') lines.push('- Set run_in_background when you have other work to do meanwhile; collect the answer with task_output once you are told it finished.')
  if (background === 'continuable') lines.push('- Set run_in_background to start a child you can keep talking to: you get its id at once and a message each time it finishes; send it more work with send_message.')
  lines.push("- A child's answer is for you, not the user: check it, then pass on what matters.")
  return lines.join('\n')
}

/** Whether `agent` may still delegate through a tool whose requests carry `maxDepth`. */
export function belowDepthBound(agent: Agent, maxDepth: number | undefined): boolean {
  const bound = effectiveMaxDepth({ parent: agent, maxDepth })
  return bound === undefined || agent.depth + 1 <= bound
}
