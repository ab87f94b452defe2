import { errorMessage } from '@dsh/base'
import { assertNever, STOP_REASONS, taskStatusOfStop, type StopReason } from '@dsh/base'
import type { Context } from 'cordis'
import { outputText, type SubagentRequest, type SubagentResult, type SubagentRun } from '@dsh/subagent'
import { TaskError, type TaskOutcome } from '@dsh/tasks'
import type { ToolExecution, ToolOutput } from '@dsh/tools'

export const NO_TASKS_MESSAGE = 'background delegation needs the tasks runtime: load @dsh/tasks and @dsh/tool-tasks'

/**
 * A finished run as a task outcome: `completed` carries the answer, `aborted` is a kill
 * (the only thing that aborts a background run is its task being stopped), and every
 * other reason, known or not, is a failure naming the reason and the diagnostic. Partial
 * output travels along so a failed or killed task still shows what the child had.
 */
export function runOutcome(result: SubagentResult): TaskOutcome {
  const text = outputText(result.output)
  // A reason this version has no word for (a newer provider's) is a failure.
  const status = (STOP_REASONS as readonly string[]).includes(result.stopReason) ? taskStatusOfStop(result.stopReason as StopReason) : 'failed'
  switch (status) {
    case 'completed':
      return { status, output: result.structured !== undefined ? JSON.stringify(result.structured) : text }
    case 'killed':
      return { status, detail: 'the subagent was stopped', output: text }
    case 'failed':
      return { status, detail: result.diagnostic ? `${result.stopReason}: ${result.diagnostic}` : result.stopReason, output: text }
    default:
      return assertNever(status)
  }
}

/**
 * The task's `done`: the run's outcome, settled only after `run.dispose()` has finished,
 * so "the task has settled" means "the child is gone" and an owner's disposal that awaits
 * it cannot finish while the child still runs. An infrastructure rejection of `result`,
 * or a failed release, is contained as `failed`: `done` never rejects.
 */
export async function settleRun(run: SubagentRun): Promise<TaskOutcome> {
  let outcome: TaskOutcome
  try {
    outcome = runOutcome(await run.result)
  } catch (error) {
    outcome = { status: 'failed', detail: `the subagent run failed: ${errorMessage(error)}` }
  }
  try {
    await run.dispose()
  } catch (error) {
    const problem = `releasing the subagent failed: ${errorMessage(error)}`
    return { status: 'failed', detail: outcome.detail ? `${outcome.detail}; ${problem}` : problem, ...(outcome.output !== undefined && { output: outcome.output }) }
  }
  return outcome
}

/**
 * `run_in_background`: start the run, hand it to `ctx.tasks` as a final-output task of
 * kind `subagent` owned by the calling agent, and return its id at once. After
 * publication the call's signal no longer reaches the child (the call ends right away);
 * the task's own controller does, through `task_kill` or the owner's disposal.
 */
export async function startBackground(ctx: Context, provider: string, request: SubagentRequest, exec: ToolExecution): Promise<ToolOutput> {
  // Looked up, not injected: foreground delegation works without the tasks runtime.
  const tasks = ctx.get('tasks')
  if (!tasks) {
    ctx.logger('tool-subagent').warn(NO_TASKS_MESSAGE)
    return { isError: true, content: NO_TASKS_MESSAGE }
  }
  if (exec.signal.aborted) return { isError: true, content: 'the subagent was not started: the call was aborted' }
  const owner = exec.agent.id
  try {
    // Refuse before a child exists, rather than start one only to stop it.
    tasks.assertAdmission({ kind: 'subagent', owner })
  } catch (error) {
    if (error instanceof TaskError) return { isError: true, content: `the subagent was not started: ${error.message}` }
    throw error
  }

  const controller = new AbortController()
  // Until the run is published the call can still be cancelled (its turn aborted mid-start).
  const forward = () => controller.abort(exec.signal.reason)
  exec.signal.addEventListener('abort', forward, { once: true })
  let run: SubagentRun
  try {
    run = await ctx.subagents.start(provider, { ...request, signal: controller.signal })
  } catch (error) {
    return { isError: true, content: `the subagent could not be started: ${errorMessage(error)}` }
  } finally {
    exec.signal.removeEventListener('abort', forward)
  }

  const done = settleRun(run)
  const refuse = async (message: string): Promise<ToolOutput> => {
    run.cancel(message)
    await done
    return { isError: true, content: `the subagent was not started: ${message}` }
  }
  if (exec.signal.aborted) return refuse('the call was aborted')
  let id: string
  try {
    id = tasks.register({ kind: 'subagent', label: request.label ?? 'subagent', owner, cancel: (reason) => run.cancel(reason), done })
  } catch (error) {
    if (error instanceof TaskError) return refuse(error.message)
    await refuse(errorMessage(error))
    throw error
  }
  return `started background subagent task ${id}; collect its answer with task_output (wait: true to block), stop it with task_kill`
}
