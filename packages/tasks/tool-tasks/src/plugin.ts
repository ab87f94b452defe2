import type { Context } from 'cordis'
import Schema from 'schemastery'
import { MAX_WAIT_MS } from '@dsh/tasks'
import { NoticeDesk } from './notices.js'
import { registerTaskTools } from './tools.js'
import { TASKS_GUIDANCE, TASKS_SECTION_ORDER } from './guidance.js'

export interface TaskToolsConfig {
  defaultWaitMs: number
  maxConsecutiveWakeups: number
}

/**
 * The model-facing surface of `ctx.tasks`: `task_output`, `task_list`, `task_kill`, and
 * the completion notices that tell an owner its work has ended. It attaches itself as
 * the registry's surface, so tasks can be registered only while it is loaded.
 */
export class TaskToolsPlugin {
  static inject = ['tasks', 'tools', 'agents']
  static Config: Schema<TaskToolsConfig> = Schema.object({
    defaultWaitMs: Schema.natural().max(MAX_WAIT_MS).default(30_000).description('How long task_output with wait: true waits when timeout_ms is not given.'),
    maxConsecutiveWakeups: Schema.natural().default(10).description('Most turns notices may start in a row for one agent without other input; 0: never wake, only inject into running turns.'),
  })

  constructor(ctx: Context, config: TaskToolsConfig) {
    ctx.tasks.attachSurface('@dsh/tool-tasks')
    registerTaskTools(ctx, config)
    ctx.agents.addPromptSection({ name: 'tasks', order: TASKS_SECTION_ORDER, tool: 'task_output', render: () => TASKS_GUIDANCE })
    const desk = new NoticeDesk(ctx.tasks, ctx.agents, config.maxConsecutiveWakeups, ctx.logger('tool-tasks'))
    ctx.tasks.onSettled((task) => desk.settled(task))
    // Settlements while this plugin was not loaded (a reload) reached no listener: announce them now.
    for (const task of ctx.tasks.unreported()) desk.settled(task)
    ctx.agents.onCleanup((agent) => desk.forget(agent.id))
    ctx.effect(() => () => desk.close(), 'tool-tasks: stop watching owners')
  }
}

export default TaskToolsPlugin
