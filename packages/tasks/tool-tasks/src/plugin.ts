import type { Context } from 'cordis'
import Schema from 'schemastery'
import { MAX_WAIT_MS } from '@dsh/tasks'
import { renderNotice } from './render.js'
import { registerTaskTools } from './tools.js'
import { TASKS_GUIDANCE, TASKS_SECTION_ORDER } from './guidance.js'

export interface TaskToolsConfig {
  defaultWaitMs: number
}

/**
 * The model-facing surface of `ctx.tasks`: `task_output`, `task_list`, `task_kill`, and
 * the wording of the completion notices that tell an owner its work has ended (delivered
 * by the registry's one notice path). It attaches itself as the registry's surface, so
 * tasks can be registered only while it is loaded.
 */
export class TaskToolsPlugin {
  static inject = ['tasks', 'tools', 'agents']
  static Config: Schema<TaskToolsConfig> = Schema.object({
    defaultWaitMs: Schema.natural().max(MAX_WAIT_MS).default(30_000).description('How long task_output with wait: true waits when timeout_ms is not given.'),
  })

  constructor(ctx: Context, config: TaskToolsConfig) {
    ctx.tasks.attachSurface('@dsh/tool-tasks', { renderNotice })
    registerTaskTools(ctx, config)
    ctx.agents.addPromptSection({ name: 'tasks', order: TASKS_SECTION_ORDER, tool: 'task_output', render: () => TASKS_GUIDANCE })
  }
}

export default TaskToolsPlugin
