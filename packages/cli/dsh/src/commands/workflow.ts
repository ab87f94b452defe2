/**
 * `dsh workflow run FILE`: a workflow module (`@dsh/workflow`) run under one root agent of
 * its own, composed as `dsh run` composes (`startRuntime`), its children shown by the run's
 * live view (`watch`), its return value printed. `--resume ID` goes on with a run whose
 * process stopped, reusing every call that finished.
 */
import { relative } from 'node:path'
import type { Agent } from '@dsh/agent'
import { errorMessage, isRecord } from '@dsh/base'
import { describeChange, Journal, loadWorkflow, readJournal, WorkflowError, WorkflowRunner, type JournalReading, type LoadedWorkflow, type WorkflowOutcome, type WorkflowSettings } from '@dsh/workflow'
import { parseVerbArgs, wholeNumberOption } from '../args.js'
import type { PluginEntry } from '../compose.js'
import { UsageError } from '../errors.js'
import { exitCodeOfSignal } from '../exit.js'
import { withoutFrameworkStacks } from '../framework-stacks.js'
import { onInterrupt } from '../interrupt.js'
import { installRunPermission, parseRunPermission } from '../permission-prompt.js'
import { watch, type RunView } from '../progress/run-view.js'
import { chooseModel, NO_MODEL_HELP, replayProblems } from '../run.js'
import { startRuntime } from '../runtime.js'
import { stopStartedGroups } from '../stop-groups.js'

/** `--budget KEY=VALUE,…`: the tree budget's keys a workflow may set from the command line. */
const BUDGET_KEYS = ['outputTokens', 'inputTokens', 'children', 'cost', 'wallTimeMs'] as const

export async function workflowVerb(args: string[]): Promise<number> {
  const { values, positionals } = parseVerbArgs('workflow', {
    args,
    allowPositionals: true,
    options: {
      config: { type: 'string' },
      model: { type: 'string' },
      'session-dir': { type: 'string' },
      verbose: { type: 'boolean', default: false },
      json: { type: 'boolean', default: false },
      quiet: { type: 'boolean', default: false },
      resume: { type: 'string' },
      'max-concurrent': { type: 'string' },
      budget: { type: 'string' },
      permission: { type: 'string' },
      record: { type: 'string' },
    },
  })
  const [verb, file, ...extra] = positionals
  if (verb !== 'run' || file === undefined || extra.length > 0) throw new UsageError('USAGE', 'dsh workflow: usage: dsh workflow run FILE [options] (dsh workflow --help lists them)')
  const permission = parseRunPermission(values.permission) ?? 'reject'
  if (permission === 'ask') throw new UsageError('USAGE', 'dsh workflow run: --permission ask is not offered (a workflow runs many children at once); use allow or reject, or approval rules in dsh.yml')
  const maxConcurrent = wholeNumberOption('dsh workflow run', '--max-concurrent', values['max-concurrent'], 1, 10_000)
  const budget = parseBudget(values.budget)
  // The file first: a workflow that does not load costs no composition.
  const workflow = await loadWorkflow(file).catch((error: unknown) => {
    throw error instanceof WorkflowError ? new UsageError('USAGE', `dsh workflow run: ${error.message}`) : error
  })
  const tree = { ...(maxConcurrent !== undefined && { maxConcurrent }), ...(budget !== undefined && { budget }) }
  const entries: PluginEntry[] = [{ id: 'workspaces', name: '@dsh/workspaces' }]
  if (Object.keys(tree).length > 0) entries.push({ id: 'subagents', name: '@dsh/subagent', config: { tree } })
  const model = chooseModel(values.model)
  const runtime = await startRuntime({ config: values.config, model, sessionDir: values['session-dir'], verbose: values.verbose, checkReady: true, extra: entries, ...(values.record !== undefined && { record: values.record }) })
  let agent: Agent | undefined
  let view: RunView | undefined
  let removeGate: (() => void) | undefined
  let cancelledBy: NodeJS.Signals | undefined
  let runner: WorkflowRunner | undefined
  const stopSignals = onInterrupt(
    (signal) => {
      cancelledBy ??= signal
      const notice = `dsh: cancelling the workflow (${signal === 'SIGINT' ? 'Ctrl-C' : signal} again to exit now)`
      if (view) view.notice(notice)
      else process.stderr.write(`${notice}\n`)
      runner?.stop(new WorkflowError('CANCELLED', `the workflow was cancelled by ${signal}`))
    },
    (signal) => void stopStartedGroups().finally(() => process.exit(exitCodeOfSignal(signal))),
  )
  try {
    const { ctx } = runtime
    if (!ctx.llm.config.model && !model) throw new UsageError('NO_MODEL', NO_MODEL_HELP)
    const resumed = values.resume === undefined ? undefined : await readResumed(runtime.ctx, values.resume)
    // The root never asks a model: the workflow is its turn. A notice its tree posts to it (a
    // budget warning) would wake it into a turn of its own; with no step allowed that turn ends
    // at once, asking no model (maxSteps is the root's alone: children do not inherit it).
    const rootOptions = { agentOptions: { maxSteps: 0 } }
    agent = await ctx.agents.create(resumed ? { sessionId: resumed.id, ...rootOptions } : { meta: { origin: 'workflow', cwd: process.cwd() }, ...rootOptions })
    const say = (line: string) => (view ? view.notice(line) : process.stderr.write(`${line}\n`))
    view = watch(runtime, agent, { quiet: values.quiet, tty: process.stdout.isTTY === true && !values.json, stream: false })
    removeGate = installRunPermission(ctx, { policy: permission, warn: say })
    const shownFile = relative(process.cwd(), workflow.file) || workflow.file
    say(`dsh: workflow ${shownFile}: session ${agent.id}${resumed ? ` (resumed: ${[...resumed.reading.completed.values()].reduce((sum, list) => sum + list.length, 0)} finished calls on record)` : ''}; dsh workflow run ${shownFile} --resume ${agent.id} goes on from here if it stops`)
    if (resumed?.reading.source !== undefined && resumed.reading.source !== workflow.source) {
      say(`dsh: warning: ${shownFile} changed since session ${agent.id} ran it (${describeChange(resumed.reading.source, workflow.source)}); only calls whose key still matches are reused`)
    }
    const journal = new Journal(agent.session)
    journal.begin(shownFile, workflow.source)
    runner = new WorkflowRunner(ctx, agent, journal, settingsOf(runtime.entries, { maxConcurrent, resumed: resumed?.reading, workflow, warn: say }))
    const outcome = await runner.run(workflow)
    view.close()
    const code = report(outcome, journal, agent.id, values.json)
    // A replay (--model replay:DIR) that diverged from its recording is a failure whatever the workflow returned.
    const replayed = replayProblems(runtime)
    if (replayed.length > 0) {
      process.stderr.write(`dsh: ${replayed.join('; ')}\n`)
      return 1
    }
    return code
  } finally {
    view?.close()
    stopSignals()
    removeGate?.()
    await withoutFrameworkStacks(values.verbose === true, async () => {
      await agent?.dispose().catch((error: unknown) => process.stderr.write(`dsh: disposing the workflow's root agent failed: ${errorMessage(error)}\n`))
      await runtime.dispose()
    })
    if (cancelledBy !== undefined) process.exitCode = exitCodeOfSignal(cancelledBy)
  }
}

function parseBudget(raw: string | undefined): Record<string, number> | undefined {
  if (raw === undefined) return undefined
  const budget: Record<string, number> = {}
  for (const part of raw.split(',')) {
    const [key, value, ...rest] = part.split('=')
    const known = BUDGET_KEYS.find((name) => name === key?.trim())
    const amount = Number(value)
    if (known === undefined || rest.length > 0 || value === undefined || !(amount > 0) || (known !== 'cost' && !Number.isInteger(amount))) {
      throw new UsageError('USAGE', `dsh workflow run: --budget takes KEY=VALUE[,KEY=VALUE…] with KEY one of ${BUDGET_KEYS.join(', ')} and a positive number (got "${part}")`)
    }
    budget[known] = amount
  }
  return budget
}

/** `--resume ID`: a stored session that a workflow run recorded, and what it finished. */
async function readResumed(ctx: import('cordis').Context, id: string): Promise<{ id: string; reading: JournalReading }> {
  const stored = await ctx.sessions.readStored(id).catch((error: unknown) => {
    throw new UsageError('SESSION', `dsh workflow run: session ${id} cannot be read: ${errorMessage(error)}`)
  })
  if (!stored) throw new UsageError('SESSION', `dsh workflow run: no stored session ${id}; the id is on the first line a workflow run prints (dsh sessions list shows the stored ones)`)
  const reading = readJournal({ events: () => [...stored.events] })
  if (reading === undefined) throw new UsageError('SESSION', `dsh workflow run: session ${id} is not a workflow run's (dsh run --resume goes on with other sessions)`)
  return { id, reading }
}

/** What the runner takes from the composition: the subagent tool's ceiling and the tree's limits. */
function settingsOf(
  entries: readonly PluginEntry[],
  options: { maxConcurrent: number | undefined; resumed: JournalReading | undefined; workflow: LoadedWorkflow; warn: (line: string) => void },
): WorkflowSettings {
  const toolConfig = entries.find((entry) => entry.name === '@dsh/tool-subagent')?.config ?? {}
  const treeConfig = entries.find((entry) => entry.name === '@dsh/subagent')?.config?.tree
  const tree = isRecord(treeConfig) ? treeConfig : {}
  const treeCap = typeof tree.maxConcurrent === 'number' ? tree.maxConcurrent : undefined
  const wallTimeMs = isRecord(tree.budget) && typeof tree.budget.wallTimeMs === 'number' ? tree.budget.wallTimeMs : undefined
  // A config file's tree settings replace the command line's (its entry is merged over them): the workflow still holds itself to the flag.
  if (options.maxConcurrent !== undefined && treeCap !== options.maxConcurrent) options.warn(`dsh: warning: --max-concurrent ${options.maxConcurrent} was replaced by the config's subagents tree settings (tree.maxConcurrent ${treeCap ?? 'unset'}); the workflow runs at most ${Math.min(options.maxConcurrent, treeCap ?? Infinity)} calls at once`)
  const toolFilter = isRecord(toolConfig.toolFilter) ? (toolConfig.toolFilter as { allow?: string[]; deny?: string[] }) : undefined
  return {
    toolSettings: { ...(typeof toolConfig.maxDepth === 'number' && { maxDepth: toolConfig.maxDepth }), ...(toolFilter && { toolFilter }) },
    ...(treeCap !== undefined && { treeCap }),
    ...(options.maxConcurrent !== undefined && treeCap !== options.maxConcurrent && { maxConcurrent: options.maxConcurrent }),
    ...(wallTimeMs !== undefined && { wallTimeMs }),
    ...(options.resumed && { resumed: options.resumed }),
    ...(options.workflow.options.rerunSideEffects && { rerunSideEffects: true }),
    warn: options.warn,
  }
}

/** Close the run's record and print its outcome: the return value, or why it stopped and what finished. */
function report(outcome: WorkflowOutcome, journal: Journal, sessionId: string, json: boolean): number {
  const { calls } = outcome
  const counts = `${calls.run} call${calls.run === 1 ? '' : 's'} run, ${calls.reused} reused, ${calls.failed} failed`
  if (outcome.error === undefined) {
    const text = outcome.value === undefined ? '' : typeof outcome.value === 'string' ? outcome.value : JSON.stringify(outcome.value, null, 2) ?? String(outcome.value)
    journal.finish(text, 'completed')
    if (json) process.stdout.write(`${JSON.stringify({ session: sessionId, value: outcome.value ?? null, calls })}\n`)
    else if (text !== '') process.stdout.write(`${text}\n`)
    process.stderr.write(`dsh: workflow finished: ${counts} (session ${sessionId})\n`)
    return 0
  }
  const { error } = outcome
  const code = error instanceof WorkflowError ? error.code : 'THREW'
  const message = error instanceof WorkflowError ? error.message : `the workflow threw: ${errorMessage(error)}`
  const reason = code === 'BUDGET' ? 'budget' : code === 'CANCELLED' ? 'aborted' : 'error'
  journal.finish(`stopped: ${message}`, reason, message)
  const finished = outcome.finished.map(({ label, text, structured }) => ({ label, ...(structured !== undefined ? { structured } : { text }) }))
  if (json) process.stdout.write(`${JSON.stringify({ session: sessionId, stopped: { code, message }, calls, finished })}\n`)
  else if (finished.length > 0) process.stdout.write(`${JSON.stringify(finished, null, 2)}\n`)
  process.stderr.write(`dsh: workflow stopped${code === 'BUDGET' ? ' by its budget' : ''}: ${message}\ndsh: ${counts}; what finished is ${json ? 'in "finished"' : 'on stdout'} and recorded in session ${sessionId} (--resume ${sessionId} goes on)\n`)
  return code === 'CANCELLED' ? 130 : 1
}
