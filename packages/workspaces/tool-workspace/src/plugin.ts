/**
 * The model's handle on its children's workspaces: one tool, `workspace`, with an action.
 * `merge` brings a child's changes into the directory it came from (its branch merged, or
 * its copy's files written back), `discard` throws them away, `changes` shows them. A
 * conflict changes nothing and comes back as a result listing the files. Only the agent
 * that started the child, or one of that agent's ancestors, may act on its workspace
 * (`actingAgents`, recorded when the workspace was made); merging and discarding change
 * files, so they are side effects the approval broker decides like any other.
 */
import type { Context } from 'cordis'
import Schema from 'schemastery'
import { errorMessage } from '@dsh/base'
import type { Agent } from '@dsh/agent'
import type { ToolExecution, ToolOutput } from '@dsh/tools'
import { actingAgents, type MergeOutcome, type WorkspaceChanges, type WorkspaceRecord } from '@dsh/workspaces'

interface WorkspaceToolArgs {
  action: 'merge' | 'discard' | 'changes'
  subagent_id: string
}

export class WorkspaceToolPlugin {
  static inject = ['tools', 'workspaces']
  static Config: Schema<WorkspaceToolPlugin.Config> = Schema.object({
    toolName: Schema.string().pattern(/^[A-Za-z0-9_-]{1,64}$/).default('workspace').description('The model-facing tool name.'),
  })

  constructor(ctx: Context, config: WorkspaceToolPlugin.Config) {
    ctx.tools.register<WorkspaceToolArgs>({
      name: config.toolName,
      description: [
        "Bring a child's workspace back, throw it away, or look at it. A subagent started with a workspace of its own (a worktree on a branch, or a copy) changes nothing in your directory: its result lists what it changed.",
        '- merge: its changes into your directory (its branch merged; a conflict changes nothing and lists the files).',
        '- discard: throw its workspace and branch away.',
        '- changes: what it changed so far.',
      ].join('\n'),
      parameters: {
        type: 'object',
        properties: {
          action: { type: 'string', enum: ['merge', 'discard', 'changes'], description: 'What to do with the workspace.' },
          subagent_id: { type: 'string', minLength: 1, maxLength: 256, description: "The subagent whose workspace it is (its result names it), or its label when exactly one of your subagents' (or their subagents') workspaces has that label." },
        },
        required: ['action', 'subagent_id'],
        additionalProperties: false,
      },
      sideEffecting: true,
      execute: (args, exec) => act(ctx, args, exec),
    })
  }
}

async function act(ctx: Context, args: WorkspaceToolArgs, exec: ToolExecution): Promise<ToolOutput> {
  const { workspaces } = ctx
  const caller = exec.agent as Agent
  try {
    const listed = (await workspaces.list()).filter((candidate): candidate is WorkspaceRecord & { orphaned: boolean } => candidate.invalid === undefined)
    // Only the agent that started the child, or one above it: not a sibling, not the child's own subagents, not another tree.
    const mayAct = (record: WorkspaceRecord) => actingAgents(record).includes(caller.id)
    // By id, or by the label of exactly one workspace the caller may act on (as send_message takes one).
    const byId = listed.find((candidate) => candidate.childId === args.subagent_id)
    const byLabel = listed.filter((candidate) => mayAct(candidate) && candidate.label === args.subagent_id)
    if (byId === undefined && byLabel.length > 1) return { isError: true, content: `${byLabel.length} of your subagents' workspaces have the label "${args.subagent_id}" (${byLabel.map((record) => record.childId).join(', ')}); name one by its id` }
    const record = byId ?? byLabel[0]
    if (record === undefined) return { isError: true, content: `subagent ${args.subagent_id} has no workspace (it worked in the shared directory, or its workspace was merged or discarded already)` }
    if (!mayAct(record)) return { isError: true, content: `the workspace of subagent ${args.subagent_id} is not yours to act on: only the agent that started that subagent${record.parentAgent !== undefined ? ` (${record.parentAgent})` : ''}, or one of its ancestors, may merge, discard or look at it` }
    const childId = record.childId
    switch (args.action) {
      case 'changes':
        return describeChanges(await workspaces.changes(childId))
      case 'discard':
        await workspaces.discard(childId)
        return `discarded the workspace of subagent ${childId}${record.branch ? ` and its branch ${record.branch}` : ''}; nothing of it reached your directory`
      case 'merge':
        return describeMerge(await workspaces.merge(childId))
    }
  } catch (error) {
    return { isError: true, content: `workspace ${args.action} of subagent ${args.subagent_id} failed: ${errorMessage(error)}` }
  }
}

function describeChanges(changes: WorkspaceChanges): string {
  if (changes.missing) return `the workspace directory of subagent ${changes.childId} is gone${changes.committed ? ', but its branch has commits (merge or discard them)' : ''}`
  const files = changes.files.map((file) => `  ${file.status} ${file.path}${file.added !== undefined ? ` (+${file.added} -${file.removed ?? 0})` : ''}`)
  return [`${changes.mode === 'worktree' ? `branch ${changes.branch}` : `copy at ${changes.path}`}: ${changes.diffstat}${changes.uncommitted ? ' (some uncommitted)' : ''}`, ...files].join('\n')
}

function describeMerge(outcome: MergeOutcome): ToolOutput {
  if (outcome.ok) return outcome.summary
  return { isError: true, content: `${outcome.summary}\nconflicting files:\n${outcome.conflicts.map((path) => `  ${path}`).join('\n')}\nResolve them in your directory (or ask the child to rebase its work), or discard the workspace.` }
}

export namespace WorkspaceToolPlugin {
  export interface Config {
    toolName: string
  }
}

export default WorkspaceToolPlugin
