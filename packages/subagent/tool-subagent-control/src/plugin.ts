import type {} from '@dsh/approvals'
import type { Context } from 'cordis'
import Schema from 'schemastery'
import { errorMessage } from '@dsh/base'
import type { Agent } from '@dsh/agent'
import { SubagentError } from '@dsh/subagent'
import type { ToolExecution, ToolOutput } from '@dsh/tools'
import { renderAgents } from './render.js'

export interface SendMessageArgs {
  subagent_id: string
  message: string
}

export interface InterruptAgentArgs {
  agent_id: string
}

export interface ListAgentsArgs {
  scope?: 'children' | 'descendants'
}

/** Where continuable-child guidance sits in the system prompt (after the subagent tools'). */
export const CONTROL_SECTION_ORDER = 250

/** How to work with continuable children: follow up instead of restarting, no polling, interrupts. */
export const CONTROL_GUIDANCE = [
  '# Continuable subagents',
  '- A subagent started in continuable mode keeps its history between turns: give it follow-up work with send_message rather than starting a new one, so it builds on what it already knows.',
  '- You get a message each time one of them finishes a turn. Do not poll them with list_agents; use it when you need their ids or states.',
  '- Stop a running turn that is no longer needed or going wrong with interrupt_agent; the subagent stays available for more messages.',
].join('\n')

/**
 * The model's controls over continuable children: `send_message` (only to its own
 * children: a new turn for them), `interrupt_agent` (any descendant: stops its running
 * turn, it stays resumable) and `list_agents`. Each acts for the calling agent.
 */
export class SubagentControlPlugin {
  static inject = ['subagents', 'tools', 'agents']
  static Config: Schema<SubagentControlPlugin.Config> = Schema.object({})

  constructor(ctx: Context) {
    const caller = (exec: ToolExecution): Agent => {
      const agent = ctx.agents.get(exec.agent.id)
      if (!agent) throw new SubagentError('UNAUTHORIZED', `the calling agent ${exec.agent.id} is not live`)
      return agent
    }

    ctx.tools.register<SendMessageArgs>({
      name: 'send_message',
      description:
        'Send a message to one of your continuable subagents (started with a subagent tool in continuable mode). It becomes the subagent\'s next turn; it keeps its whole history, even after a restart. You are told when that turn ends.',
      parameters: {
        type: 'object',
        properties: {
          subagent_id: { type: 'string', minLength: 1, description: 'The subagent id (list_agents shows yours), or its label when exactly one of your subagents has that label.' },
          message: { type: 'string', minLength: 1, description: 'What to tell or ask the subagent.' },
        },
        required: ['subagent_id', 'message'],
        additionalProperties: false,
      },
      concurrencySafe: true,
      execute: (args, exec) =>
        refused('message not delivered', async () => {
          const parent = caller(exec)
          const childId = await resolveChild(ctx, parent.id, args.subagent_id, exec.signal)
          await ctx.subagents.followup(parent, childId, args.message, { signal: exec.signal })
          return `message queued as the next turn for subagent ${childId}`
        }),
    })

    ctx.tools.register<InterruptAgentArgs>({
      name: 'interrupt_agent',
      description: 'Stop the running turn of a continuable subagent you started (directly or through your subagents). It keeps its history and can be sent more work.',
      parameters: {
        type: 'object',
        properties: { agent_id: { type: 'string', minLength: 1, description: 'The subagent id.' } },
        required: ['agent_id'],
        additionalProperties: false,
      },
      execute: (args, exec) =>
        refused('interrupt refused', async () => {
          await ctx.subagents.interrupt(args.agent_id, { kind: 'ancestor', agent: caller(exec) })
          return `interrupt requested for agent ${args.agent_id}`
        }),
    })

    ctx.agents.addPromptSection({ name: 'subagent-control', order: CONTROL_SECTION_ORDER, tool: 'send_message', render: () => CONTROL_GUIDANCE })

    ctx.tools.register<ListAgentsArgs>({
      name: 'list_agents',
      description: 'List your continuable subagents with their state (running or idle) and label; scope "descendants" includes theirs, with parent and depth.',
      parameters: {
        type: 'object',
        properties: { scope: { type: 'string', enum: ['children', 'descendants'], description: 'children (default) or descendants.' } },
        additionalProperties: false,
      },
      concurrencySafe: true,
      execute: (args, exec) =>
        refused('listing failed', async () => {
          const descendants = args.scope === 'descendants'
          const listed = descendants ? await ctx.subagents.listDescendants(exec.agent.id, exec.signal) : await ctx.subagents.listChildren(exec.agent.id, exec.signal)
          return renderAgents(listed, descendants, (childId) => ctx.get('approvals')?.waitingNote(childId))
        }),
    })
  }
}

/**
 * The child `wanted` names: an id of one of the caller's children as given, else the one
 * child of the caller with that label (models name children by what they do); a label
 * several children share is `AMBIGUOUS_CHILD`, listing their ids. Anything else is passed
 * on unchanged, for the service to refuse with its own reason.
 */
export async function resolveChild(ctx: Context, parentId: string, wanted: string, signal: AbortSignal): Promise<string> {
  const children = await ctx.subagents.listChildren(parentId, signal)
  if (children.some((child) => child.childId === wanted)) return wanted
  const labelled = children.filter((child) => child.label === wanted)
  if (labelled.length > 1) {
    throw new SubagentError('AMBIGUOUS_CHILD', `${labelled.length} of your subagents are labelled "${wanted}" (${labelled.map((child) => child.childId).join(', ')}); name one by its id`)
  }
  return labelled[0]?.childId ?? wanted
}

/** A refusal of the seam becomes an error result the model can read; anything else is a fault. */
async function refused(what: string, act: () => Promise<string>): Promise<ToolOutput> {
  try {
    return await act()
  } catch (error) {
    if (error instanceof SubagentError) return { isError: true, content: `${what}: ${errorMessage(error)}` }
    throw error
  }
}

export namespace SubagentControlPlugin {
  export interface Config {}
}
