import type { Context } from 'cordis'
import { MAX_WAIT_MS, TaskError } from '@dsh/tasks'
import type { ToolExecution, ToolOutput } from '@dsh/tools'
import { renderKill, renderList, renderRead } from './render.js'

export interface TaskOutputArgs {
  task_id: string
  wait?: boolean
  timeout_ms?: number
}

export interface TaskKillArgs {
  task_id: string
  reason?: string
}

const TASK_ID = { type: 'string', minLength: 1, description: 'The task id, e.g. bash-1 or subagent-2 (task_list shows yours).' }

/**
 * Register `task_output`, `task_list` and `task_kill` on `ctx`. The calling agent is the
 * owner the registry fences on, so one agent can never see or stop another's work.
 */
export function registerTaskTools(ctx: Context, options: { defaultWaitMs: number }): void {
  ctx.tools.register<TaskOutputArgs>({
    name: 'task_output',
    description:
      'Read the output of one of your background tasks. A command\'s output is read incrementally: each call returns what is new since the last. A subagent\'s answer is there once it has finished. ' +
      `Set wait to true to block until the task ends (at most timeout_ms, default ${options.defaultWaitMs}).`,
    parameters: {
      type: 'object',
      properties: {
        task_id: TASK_ID,
        wait: { type: 'boolean', description: 'Wait for the task to end before reading (default false).' },
        timeout_ms: { type: 'integer', minimum: 0, maximum: MAX_WAIT_MS, description: `How long to wait at most, in milliseconds (default ${options.defaultWaitMs}).` },
      },
      required: ['task_id'],
      additionalProperties: false,
    },
    concurrencySafe: true,
    execute: (args, exec) =>
      guarded(async () => {
        if (!args.wait) return renderRead(ctx.tasks.read(args.task_id, exec.agent.id))
        const timeout = args.timeout_ms ?? options.defaultWaitMs
        return renderRead(await ctx.tasks.wait(args.task_id, exec.agent.id, timeout, exec.signal), { waitedMs: timeout })
      }),
  })

  ctx.tools.register<Record<string, never>>({
    name: 'task_list',
    description: 'List your background tasks (commands, subagents) with their status.',
    parameters: { type: 'object', properties: {}, additionalProperties: false },
    concurrencySafe: true,
    execute: (_args, exec) => renderList(ctx.tasks.list(exec.agent.id)),
  })

  ctx.tools.register<TaskKillArgs>({
    name: 'task_kill',
    description: 'Stop one of your background tasks. Returns once it has stopped.',
    parameters: {
      type: 'object',
      properties: {
        task_id: TASK_ID,
        reason: { type: 'string', description: 'Why it is stopped; recorded as the task\'s status detail.' },
      },
      required: ['task_id'],
      additionalProperties: false,
    },
    execute: (args, exec: ToolExecution) =>
      guarded(async () => {
        const wasLive = ctx.tasks.get(args.task_id, exec.agent.id).status === 'running'
        const reason = args.reason?.trim() || 'killed with task_kill'
        return renderKill(await ctx.tasks.kill(args.task_id, exec.agent.id, reason, exec.signal), wasLive)
      }),
  })
}

/** A registry refusal (unknown id, another owner's task) is an error result the model can act on. */
async function guarded(run: () => Promise<string>): Promise<ToolOutput> {
  try {
    return await run()
  } catch (error) {
    if (error instanceof TaskError) return { isError: true, content: error.message }
    throw error
  }
}
