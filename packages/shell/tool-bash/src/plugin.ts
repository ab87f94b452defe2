import type { Context } from 'cordis'
import Schema from 'schemastery'
import type { Agent } from '@dsh/agent'
import { BashError, type BashSandbox } from '@dsh/bash'
import { TaskError } from '@dsh/tasks'
import type { ToolExecution, ToolOutput } from '@dsh/tools'
import { backgroundOutcome, renderForeground } from './render.js'

export interface BashToolArgs {
  command: string
  timeout_ms?: number
  run_in_background?: boolean
}

/** `false`: unconfined; `true`: confined with the network; `'no-network'`: confined without it. */
export type BashToolSandbox = boolean | 'no-network'

export interface BashToolConfig {
  defaultTimeoutMs: number
  maxTimeoutMs: number
  enableRunInBackground: boolean
  sandbox: BashToolSandbox
}

/** Where shell guidance sits in the system prompt (after delegation and background-work guidance). */
export const BASH_SECTION_ORDER = 400

/** How to use the shell well: commands run in the session's working directory, non-interactively; and, when confined, what the sandbox allows. */
export function bashGuidance(background: boolean, sandbox?: BashSandbox): string {
  const lines = [
    '# Shell',
    '- bash runs each command non-interactively in the working directory above; a command must not wait for input.',
    '- Prefer commands with bounded output (head, tail, grep) over dumping large files; long output is cut in the middle.',
  ]
  if (background) lines.push('- Start servers, watchers and long builds with run_in_background; they keep running while you work.')
  if (sandbox) {
    lines.push(
      `- Commands run in a sandbox: only the working directory is writable (and a private /tmp, emptied after each command); the rest of the file system is read-only${sandbox.network ? '' : ', and there is no network'}.`,
    )
  }
  return lines.join('\n')
}

/**
 * How `agent`'s commands are confined, or `undefined` when they are not. A session header
 * with `sandbox` (a delegation that asked for one) always confines, whatever the tool
 * instance says; otherwise the instance's `sandbox` does. The cwd is writable (and, for a
 * worktree, its repository's git directory readable); the network is allowed only when
 * neither the header nor the instance turns it off (a confinement only narrows).
 */
export function sandboxFor(agent: Agent, instance: BashToolSandbox): BashSandbox | undefined {
  const { cwd, sandbox: header, workspace } = agent.session.header
  if (!header && instance === false) return undefined
  const network = (header ? header.network : true) && instance !== 'no-network'
  const sandbox: BashSandbox = { writable: [cwd], network }
  // A worktree's git data lives in the repository's git directory: keep that visible even when
  // it is under /tmp, which the sandbox replaces with a private one. Read-only, not writable:
  // a command that could write there could plant hooks or config (core.fsmonitor, a filter)
  // that the parent's own git later runs unconfined, or rewrite the parent's branches and
  // objects. So git reads the worktree, and commits from inside the sandbox fail.
  if (workspace?.mode === 'worktree') sandbox.readable = [workspace.gitDir ?? workspace.source]
  return sandbox
}

export const NO_TASKS_MESSAGE = 'background commands need the tasks runtime: load @dsh/tasks and @dsh/tool-tasks'

/**
 * The model-facing `bash` tool over `ctx.bash`. A foreground call runs the command in the
 * calling agent's session cwd and returns its exit and output; a timeout or a cancelled
 * call stops the whole process tree. `run_in_background` registers the command on
 * `ctx.tasks` as a stream task of kind `bash`, read incrementally with `task_output`.
 */
export class BashToolPlugin {
  static inject = ['bash', 'tools', 'agents']
  static Config: Schema<BashToolConfig> = Schema.object({
    defaultTimeoutMs: Schema.natural().min(1).default(120_000).description('Foreground timeout when the call gives none.'),
    maxTimeoutMs: Schema.natural().min(1).default(600_000).description('Largest timeout_ms the model may ask for.'),
    enableRunInBackground: Schema.boolean().default(true).description('Offer run_in_background in the schema.'),
    sandbox: Schema.union([Schema.const(false), Schema.const(true), Schema.const('no-network' as const)])
      .default(false)
      .description('Confine every command of this instance with bubblewrap: true (the cwd writable, the rest read-only, no other process visible), "no-network" (the same, without network), false (unconfined, unless the agent\'s session says otherwise).'),
  })

  constructor(private readonly ctx: Context, private readonly config: BashToolConfig) {
    if (config.defaultTimeoutMs > config.maxTimeoutMs) {
      throw new BashError('INVALID_CONFIG', `@dsh/tool-bash: defaultTimeoutMs (${config.defaultTimeoutMs}) exceeds maxTimeoutMs (${config.maxTimeoutMs}); lower defaultTimeoutMs or raise maxTimeoutMs`)
    }
    if (config.sandbox !== false) {
      // At load, not at the first command: an instance that promises confinement must not start without it.
      const problem = ctx.bash.sandboxProblem()
      if (problem !== undefined) throw new BashError('SANDBOX_UNAVAILABLE', `@dsh/tool-bash: sandbox: ${JSON.stringify(config.sandbox)}: ${problem}`)
    }
    const properties: Record<string, unknown> = {
      command: { type: 'string', minLength: 1, description: 'The bash command to run (bash -c), in the session\'s working directory.' },
      timeout_ms: {
        type: 'integer',
        minimum: 1,
        maximum: config.maxTimeoutMs,
        description: `Stop the command after this many milliseconds (default ${config.defaultTimeoutMs} in the foreground; none in the background).`,
      },
    }
    if (config.enableRunInBackground) {
      properties.run_in_background = {
        type: 'boolean',
        description: 'Start the command and return at once with a task id; read its output as it grows with task_output, stop it with task_kill.',
      }
    }
    ctx.tools.register<BashToolArgs>({
      name: 'bash',
      description:
        'Run a bash command and return its exit code and output (stdout and stderr together; long output keeps its beginning and end). A timeout stops the command and everything it started.' +
        (config.enableRunInBackground ? ' Use run_in_background for long-running commands (servers, watchers, long builds).' : ''),
      parameters: { type: 'object', properties, required: ['command'], additionalProperties: false },
      // Commands act on the user's machine: a front end's permission gate is asked first.
      sideEffecting: true,
      execute: (args, exec) => (args.run_in_background ? this.background(args, exec) : this.foreground(args, exec)),
    })
    ctx.agents.addPromptSection({ name: 'bash', order: BASH_SECTION_ORDER, tool: 'bash', render: (agent) => bashGuidance(config.enableRunInBackground, sandboxFor(agent, config.sandbox)) })
  }

  private async foreground(args: BashToolArgs, exec: ToolExecution): Promise<ToolOutput> {
    const timeoutMs = args.timeout_ms ?? this.config.defaultTimeoutMs
    const result = await this.ctx.bash.run({ command: args.command, cwd: exec.agent.session.header.cwd, agentId: exec.agent.id, timeoutMs, signal: exec.signal, sandbox: sandboxFor(exec.agent, this.config.sandbox) })
    return renderForeground(result, timeoutMs)
  }

  private async background(args: BashToolArgs, exec: ToolExecution): Promise<ToolOutput> {
    // Optional on purpose: foreground commands work without the tasks runtime.
    const tasks = this.ctx.get('tasks')
    if (!tasks) {
      this.ctx.logger('tool-bash').warn(NO_TASKS_MESSAGE)
      return { isError: true, content: NO_TASKS_MESSAGE }
    }
    if (exec.signal.aborted) return { isError: true, content: 'the command was not started: the call was aborted' }
    const owner = exec.agent.id
    // The slot is taken before the process exists, so a parallel call cannot slip past the limit.
    let reservation
    try {
      reservation = tasks.reserve({ kind: 'bash', owner })
    } catch (error) {
      if (error instanceof TaskError) return { isError: true, content: `the command was not started: ${error.message}` }
      throw error
    }
    // No signal: from here the task owns the process; task_kill or the owner's disposal stops it.
    let process
    try {
      process = this.ctx.bash.start({ command: args.command, cwd: exec.agent.session.header.cwd, agentId: exec.agent.id, timeoutMs: args.timeout_ms, sandbox: sandboxFor(exec.agent, this.config.sandbox) })
    } catch (error) {
      reservation.release()
      throw error
    }
    let id: string
    try {
      const started = process
      id = reservation.register({
        label: args.command,
        cancel: () => void started.stop(),
        done: started.exited.then((exit) => backgroundOutcome(exit, args.timeout_ms)),
        readOutput: (cursor) => started.read(cursor),
      })
    } catch (error) {
      await process.stop()
      if (error instanceof TaskError) return { isError: true, content: `the command was not started: ${error.message}` }
      throw error
    }
    return `started background bash task ${id} (pid ${process.pid ?? 'none'}); read its output with task_output, stop it with task_kill`
  }
}

export default BashToolPlugin
