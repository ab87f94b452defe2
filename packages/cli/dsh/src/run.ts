import type { Agent } from '@dsh/agent'
import { errorMessage } from '@dsh/base'
import { isReplayAdapter } from '@dsh/llm-replay'
import { SessionError, type SessionEvent } from '@dsh/session'
import type {} from '@dsh/subagent'
import type {} from '@dsh/approvals'
import { runUntilQuiet } from '@dsh/tasks'
import type { Composition } from './compose.js'
import { oneLineMessage, UsageError } from './errors.js'
import { resolveSessionId } from './session-ids.js'
import { exitCodeOfSignal } from './exit.js'
import { withoutFrameworkStacks } from './framework-stacks.js'
import { onInterrupt } from './interrupt.js'
import { installRunPermission, type PermissionOptions, type RunPermission } from './permission-prompt.js'
import { watch, type RunView } from './progress/run-view.js'
import { startRuntime, type RuntimeOptions } from './runtime.js'
import { stopStartedGroups } from './stop-groups.js'
import type { RunUi } from './commands/ui.js'

export { UsageError } from './errors.js'
export { jsonLine, watch, type RunView } from './progress/run-view.js'

export interface RunOptions extends RuntimeOptions {
  prompt: string
  /** Who decides whether side-effecting tools run; default `ask` on a terminal, else `reject`. */
  permission?: RunPermission
  resume?: string
  json?: boolean
  /** No live progress (the answer is still printed, and on a terminal still streamed). */
  quiet?: boolean
  /** In a pipe, write the root's text as it arrives, every step's (`--stream`), not the answer alone at the end. */
  stream?: boolean
  /** `false`: no colour on a terminal either (`--no-color`; a non-empty NO_COLOR says the same). */
  color?: boolean
  cwd?: string
  /** Override terminal detection (tests). */
  tty?: boolean
  /** Serve the run's page (`dsh run --ui`): it answers approvals unless `permission` is given. */
  ui?: boolean
}

/** What `dsh run` prints when nothing says which model to use. */
export const NO_MODEL_HELP = [
  'dsh: no model to run with.',
  '  - see it work, no key:    dsh demo',
  '  - a scripted model:       dsh run --model scripted:FILE.yml "say hello" (FILE\'s format: the @dsh/llm-scripted README)',
  '  - with DeepSeek:          export DEEPSEEK_API_KEY=... (then --model is optional)',
  '  - any OpenAI-compatible:  --model openai:MODEL with OPENAI_API_KEY, or configure @dsh/llm-openai',
  '  - a default for every run: set llm.model in dsh.yml (- id: llm, name: "@dsh/llm", config: { model: SPEC })',
].join('\n')

/** Pick the model spec: --model, then DeepSeek when its key is set (a config's `llm.model` applies otherwise). */
export function chooseModel(explicit: string | undefined, env: NodeJS.ProcessEnv = process.env): string | undefined {
  if (explicit) return explicit
  if (env.DEEPSEEK_API_KEY) return 'deepseek:deepseek-chat'
  return undefined
}

/**
 * A prompt run to completion: its turn, then every turn its background work starts, until
 * the agent is quiet. Resolves with the process exit code: 0 when the last turn completed,
 * 128 + the signal's number when SIGINT/SIGTERM cancelled it (the session records the
 * cancellation), 1 otherwise.
 */
export async function runCommand(options: RunOptions): Promise<number> {
  // With --ui and no --permission the page answers approvals: no terminal prompt, no default.
  const policy = options.ui && options.permission === undefined ? undefined : runPermission(options)
  const model = chooseModel(options.model)
  const runtime = await startRuntime({ ...options, model, checkReady: true })
  let resumed: ResumeTarget | undefined
  let agent: Agent | undefined
  let view: RunView | undefined
  let removeGate: (() => void) | undefined
  let page: RunUi | undefined
  const cancel = new AbortController()
  let cancelledBy: NodeJS.Signals | undefined
  // The first signal cancels the turn and the agent's background work; the command exits
  // once they have stopped. A second one exits at once.
  const stopSignals = onInterrupt(
    (signal) => {
      cancelledBy ??= signal
      const notice = `dsh: cancelling (${signal === 'SIGINT' ? 'Ctrl-C' : signal} again to exit now)`
      if (view) view.notice(notice)
      else process.stderr.write(`\n${notice}\n`)
      cancel.abort(new Error(`interrupted by ${signal}`))
    },
    // Exit now, but not before every process group started here was asked to go: an ACP
    // child killed outright would leave its own commands running.
    (signal) => void stopStartedGroups().finally(() => process.exit(exitCodeOfSignal(signal))),
  )
  try {
    if (options.resume !== undefined) resumed = await resumeTarget(runtime, options.resume, options.model)
    if (!runtime.ctx.llm.config.model && !model && !resumed?.model) throw new UsageError('NO_MODEL', NO_MODEL_HELP)
    agent = await runtime.ctx.agents
      .create({ sessionId: resumed?.id, meta: { origin: 'cli', cwd: options.cwd ?? process.cwd() }, ...(resumed?.model !== undefined && { agentOptions: { model: resumed.model } }) })
      .catch((error: unknown) => {
        throw resumeProblem(error, resumed?.id, runtime)
      })
    // Before the live tree draws: the page's URL goes to stderr on a line of its own.
    if (options.ui) page = await (await import('./commands/ui.js')).startRunUi(runtime.ctx, agent, { answers: policy === undefined })
    view = watch(runtime, agent, options)
    if (policy !== undefined) removeGate = installRunPermission(runtime.ctx, permissionOptions(policy, options, view))
    // The run ends once the agent is quiet: no owned work (tasks, continuable children) runs and no notice waits.
    const run = await runUntilQuiet(agent, options.prompt, { tasks: runtime.ctx.get('tasks'), signal: cancel.signal })
    view.finish(run)
    const replayed = replayProblems(runtime)
    if (replayed.length > 0) {
      view.problem(`dsh: ${replayed[0]}${replayed.length > 1 ? ` (and ${replayed.length - 1} more problem${replayed.length > 2 ? 's' : ''} after it)` : ''}`)
      return 1
    }
    if (run.cancelled) {
      view.problem(`dsh: cancelled${run.last.error ? `: ${run.last.error}` : ''}`)
      return exitCodeOfSignal(cancelledBy ?? 'SIGINT')
    }
    if (run.last.reason !== 'completed') {
      view.problem(`dsh: the turn ended ${run.last.reason}${run.last.error ? `: ${run.last.error}` : ''}`)
      return 1
    }
    return 0
  } finally {
    // A run that threw never finished its view: it stops drawing before anything else is said.
    view?.close()
    stopSignals()
    removeGate?.()
    await page?.close()
    // Stopping is framework work like starting: no stacks unless verbose (framework-stacks.ts).
    await withoutFrameworkStacks(options.verbose === true, async () => {
      await agent?.dispose().catch((error: unknown) => process.stderr.write(`dsh: disposing the agent failed: ${errorMessage(error)}\n`))
      await runtime.dispose()
    })
  }
}

/** What a replay (`--model replay:DIR`) found wrong: divergences first, then unused calls and recordings. */
export function replayProblems(runtime: Composition): string[] {
  const adapter = runtime.ctx.llm.getAdapter('replay')
  return isReplayAdapter(adapter) ? adapter.problems() : []
}

/** The session `--resume` names, and the model it goes on with. */
export interface ResumeTarget {
  id: string
  /** The model the session last ran on, when `--model` does not say otherwise and it recorded one. */
  model?: string
}

/**
 * `--resume ID`: the whole id or a unique tail of it. Without `--model` the session goes
 * on with the model it last ran on (the spec recorded with its last answer's usage), as a
 * user resuming a conversation expects; that model is checked as a start checks its own.
 */
export async function resumeTarget(runtime: Composition, wanted: string, explicitModel: string | undefined): Promise<ResumeTarget> {
  const { sessions } = runtime.ctx
  // Judged before anything else, the model included: a session that cannot be resumed is
  // the problem to report. An exact id is read on its own; the other files (broken ones
  // included) are looked at only to match a tail.
  const read = (id: string) =>
    sessions.readStored(id).catch((error: unknown) => {
      throw resumeProblem(error, id, runtime)
    })
  let id = wanted
  let stored = await read(id)
  if (!stored) {
    id = resolveSessionId(await sessions.listStored(), wanted)
    if (id !== wanted) stored = await read(id)
  }
  if (!stored) throw resumeProblem(new SessionError('NOT_FOUND', `no stored session ${id}`), id, runtime)
  // A continuable child is reached through its parent only: a local turn here would bypass its descriptor and parent.
  if (stored?.header.descriptor !== undefined && stored.header.parentSession !== undefined) {
    throw new UsageError('SESSION', `dsh run: session ${id} is a continuable subagent of ${stored.header.parentSession}; message it through its parent instead (dsh run --resume ${stored.header.parentSession} "...", whose model can send_message it)`)
  }
  const model = explicitModel === undefined ? lastModelOf(stored.events) : undefined
  if (model === undefined) return { id }
  try {
    const resolved = runtime.ctx.llm.resolve(model)
    await resolved.adapter.prepare?.(resolved.model)
  } catch (error) {
    throw new UsageError('NO_MODEL', `dsh run: session ${id} ran on ${model}, which cannot be used here: ${oneLineMessage(error)}; pass --model SPEC to go on with another`)
  }
  return { id, model }
}

/** The model spec of the last answer a session's log records usage for. */
function lastModelOf(events: readonly SessionEvent[]): string | undefined {
  for (let index = events.length - 1; index >= 0; index--) {
    const event = events[index]!
    if (event.type === 'assistant/message' && event.usage?.model !== undefined) return event.usage.model
  }
  return undefined
}

/** A session that cannot be resumed is the user's input problem: say which and where to look. */
function resumeProblem(error: unknown, id: string | undefined, runtime: Composition): unknown {
  if (id === undefined || !(error instanceof SessionError)) return error
  const where = runtime.ctx.sessions.locate(id)
  if (error.code === 'NOT_FOUND') return new UsageError('SESSION', `dsh run: no stored session ${id}${where ? ` (looked for ${where})` : ''}; \`dsh sessions list\` shows the stored ones`)
  return new UsageError('SESSION', `dsh run: session ${id} cannot be resumed: ${error.message}`)
}

/** The terminal a prompt would be shown on: stdout unless it carries NDJSON or is not one, else stderr. */
function promptOutput(options: RunOptions): NodeJS.WriteStream | undefined {
  if (process.stdin.isTTY !== true) return undefined
  return !options.json && process.stdout.isTTY ? process.stdout : process.stderr.isTTY ? process.stderr : undefined
}

/**
 * The permission policy of this run, decided before anything starts: `--permission`, else
 * `ask` when someone is at a terminal to answer (standard input is one, and so is stdout
 * or stderr), else `reject`.
 */
function runPermission(options: RunOptions): RunPermission {
  const interactive = promptOutput(options) !== undefined
  const policy = options.permission ?? (interactive ? 'ask' : 'reject')
  if (policy === 'ask' && !interactive) throw new UsageError('USAGE', 'dsh run: --permission ask needs a terminal to ask on (standard input and stdout or stderr); use --permission allow or reject')
  return policy
}

function permissionOptions(policy: RunPermission, options: RunOptions, view: RunView): PermissionOptions {
  const output = promptOutput(options)
  return {
    policy,
    ...(policy === 'ask' && output && { terminal: { input: process.stdin, output, standAside: () => view.standAside() } }),
    warn: (line) => view.notice(line),
  }
}
