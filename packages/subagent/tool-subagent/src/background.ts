import { assertNever, errorMessage, taskStatusOfStop } from '@dsh/base'
import type { Context } from 'cordis'
import { outputText } from '@dsh/llm'
import type { SubagentRequest, SubagentResult, SubagentRun } from '@dsh/subagent'
import { TaskError, type TaskOutcome, type TaskReservation } from '@dsh/tasks'
import type { ToolExecution, ToolOutput } from '@dsh/tools'
import type {} from '@dsh/approvals'
import { BackgroundActivity } from './background-activity.js'
import { endingOf, workspaceNote } from './foreground.js'

export const NO_TASKS_MESSAGE = 'background delegation needs the tasks runtime: load @dsh/tasks and @dsh/tool-tasks'

/**
 * A finished run as a task outcome: `completed` carries the answer, `aborted` is a kill
 * (the only thing that aborts a background run is its task being stopped), and every
 * other reason is a failure naming the reason and the diagnostic. Partial
 * output travels along so a failed or killed task still shows what the child had.
 */
export function runOutcome(result: SubagentResult, childId?: string): TaskOutcome {
  const answer = outputText(result.output)
  const text = result.workspace !== undefined && childId !== undefined ? `${answer}\n\n${workspaceNote(childId, result.workspace)}` : answer
  const status = taskStatusOfStop(result.stopReason)
  switch (status) {
    case 'completed':
      return { status, output: result.structured !== undefined ? JSON.stringify(result.structured) : text }
    case 'killed':
      return { status, detail: 'the subagent was stopped', output: text }
    case 'failed':
      return { status, detail: endingOf(result), output: text }
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
    outcome = runOutcome(await run.result, run.id)
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
 * `run_in_background`: take a slot on `ctx.tasks` first (admission is checked and reserved
 * in one step, so a refused call creates nothing: no child, no session, no process, no
 * model request), register the task at once, and return its id without waiting for the
 * child to start (an out-of-process child may take seconds). The task's `done` starts the
 * run; a start that fails settles the task `failed` with the reason. The task's cancel
 * (`task_kill`, the owner's disposal) reaches the start as well as the run. The tool call's
 * signal matters only until the call returns, which is at once.
 */
export async function startBackground(ctx: Context, provider: string, request: SubagentRequest, exec: ToolExecution, wrap?: (run: SubagentRun) => SubagentRun): Promise<ToolOutput> {
  // Looked up, not injected: foreground delegation works without the tasks runtime.
  const tasks = ctx.get('tasks')
  if (!tasks) {
    ctx.logger('tool-subagent').warn(NO_TASKS_MESSAGE)
    return { isError: true, content: NO_TASKS_MESSAGE }
  }
  if (exec.signal.aborted) return { isError: true, content: 'the subagent was not started: the call was aborted' }
  let reservation: TaskReservation
  try {
    reservation = tasks.reserve({ kind: 'subagent', owner: exec.agent.id })
  } catch (error) {
    if (error instanceof TaskError) return { isError: true, content: `the subagent was not started: ${error.message}` }
    throw error
  }

  const controller = new AbortController()
  // What task_output hands out while the child runs, fed by the run's coalesced progress.
  const activity = new BackgroundActivity()
  let run: SubagentRun | undefined
  // Before the run exists, a kill aborts its start; after, it is the run's own cancel.
  let killReason: string | undefined
  const cancel = (reason: string) => {
    killReason = reason
    if (run) run.cancel(reason)
    else controller.abort(new Error(reason))
  }
  // Whether the child waits for a slot of its tree's cap (`tree.maxConcurrent` of ctx.subagents).
  let queued = false
  // The start is begun synchronously once the task exists (below), so whether the child had
  // to queue is known before this call returns.
  let beginStart!: () => void
  const started = new Promise<SubagentRun>((resolve, reject) => {
    beginStart = () => {
      ctx.subagents
        .start(provider, {
          ...request,
          signal: controller.signal,
          onProgress: (info) => activity.record(info),
          onWait: (waiting) => {
            queued = waiting
          },
        })
        .then(resolve, reject)
    }
  })
  const done = started.then(
    (started): Promise<TaskOutcome> => {
      // A helper's timeout (`helpers.ts`) wraps the run the task settles from.
      run = wrap ? wrap(started) : started
      // A kill that arrived while the child was starting found no run to cancel.
      if (killReason !== undefined) run.cancel(killReason)
      return settleRun(run)
    },
    (error: unknown): TaskOutcome => {
      if (killReason !== undefined) return { status: 'killed', detail: 'the subagent was stopped before it started' }
      return { status: 'failed', detail: `the subagent could not be started: ${errorMessage(error)}` }
    },
  ).then((outcome) => {
    activity.settle(outcome)
    return outcome
  })
  let id: string
  try {
    id = reservation.register({ label: request.label ?? 'subagent', cancel, done, readOutput: (cursor) => activity.read(cursor), queued: () => queued, waiting: () => (run ? ctx.get('approvals')?.waitingNote(run.id) : undefined) })
  } catch (error) {
    // The child was never started (`mayStart` is still pending): nothing to stop.
    if (error instanceof TaskError) return { isError: true, content: `the subagent was not started: ${error.message}` }
    throw error
  }
  // Started only once the task exists, so every child has a task that can stop it.
  beginStart()
  if (queued) return `queued background subagent task ${id}: its delegation tree is at its cap of concurrent children, so it starts when a slot frees up (task_list shows it queued); collect its answer with task_output (wait: true to block), remove it with task_kill`
  return `started background subagent task ${id}; collect its answer with task_output (wait: true to block), stop it with task_kill`
}
