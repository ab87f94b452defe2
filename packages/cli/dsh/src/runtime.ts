import { Context, Logger, ValidationError, type Exporter } from 'cordis'
import { DshError, errorMessage } from '@dsh/base'
import type {} from '@dsh/subagent'
import { subagentToolMountProblem } from '@dsh/tool-subagent'
import { checkEntries, compose, entriesAsWritten, mergeEntries, parseEntries, readEntries, type Composition, type PluginEntry } from './compose.js'
import { chooseConfig, chosenFile, dshHome } from './config-file.js'
import { withProjectHookTrust } from './hooks-trust.js'
import { CompositionError, oneLineMessage } from './errors.js'
import { commandLineEntries, defaultEntries, exportSessionDir } from './defaults.js'
import { withoutFrameworkStacks } from './framework-stacks.js'
import { definitionReadiness, DEFINITIONS_ENTRY_ID, sandboxProblemOf, withAgentDefinitions } from './agent-definitions.js'
import { withSkills } from './skills-entries.js'
import { helperServersUnstarted, withHelperMcp } from './mcp-entries.js'

export interface RuntimeOptions {
  config?: string
  model?: string
  sessionDir?: string
  /** Record every session's model calls into this directory (`--record`). */
  record?: string
  /** Lineage key of this process's root session, for recording and replay (an ACP child's from its parent). */
  lineageRoot?: string
  verbose?: boolean
  /** Extra entries after the defaults and before the user's config. */
  extra?: PluginEntry[]
  /**
   * Compose without ./dsh.yml or ~/.dsh/config.yml (the demo must not depend on them).
   * Otherwise a ./dsh.yml is composed only when the user trusted it (`chooseConfig`).
   */
  ignoreDiscoveredConfig?: boolean
  /**
   * Fail the start (exit 2, one line) when the composed runtime is not ready to run: see
   * `readinessProblems`. For the commands that run agents and for `config check`.
   */
  checkReady?: boolean
}

export interface ConsoleLogger {
  /**
   * Start-up is over: print the lines held back while plugins started (`failed`: the
   * start failed, and the composition error already says why; they are dropped unless
   * verbose, since a failing plugin's error would otherwise be printed twice, with its
   * cause and stack).
   */
  started(failed: boolean): void
}

/**
 * Print framework log lines (warnings and errors by default) to stderr. Error objects are
 * printed by their message; their stacks only with `verbose`.
 */
export function attachConsoleLogger(ctx: Context, verbose = false): ConsoleLogger {
  let held: string[] | undefined = []
  const write = (line: string) => {
    if (held) held.push(line)
    else process.stderr.write(line)
  }
  const exporter: Exporter = {
    colors: 0,
    levels: { default: verbose ? 3 : 1 },
    export(message) {
      // A config that fails validation is reported by compose(), naming the entry and the key.
      const [first] = message.args
      if (first instanceof ValidationError) return
      // Our own errors say what to do in their message; a stack helps only someone debugging.
      if (first instanceof Error && message.args.length === 1 && !verbose) {
        write(`[${message.type}] ${message.name}: ${first instanceof DshError ? first.message : `${first.name}: ${first.message}`}\n`)
        return
      }
      write(`[${message.type}] ${message.name}: ${Logger.format(exporter, message)}\n`)
    },
  }
  ctx.logger.exporter(exporter)
  return {
    started(failed) {
      const lines = held ?? []
      held = undefined
      if (!failed || verbose) for (const line of lines) process.stderr.write(line)
    },
  }
}

/**
 * Build the composed context for a command: defaults, command extras, then `--config`.
 * Unless verbose, its start and its `dispose()` run without stack capture (see
 * `framework-stacks.ts`).
 */
export async function startRuntime(options: RuntimeOptions): Promise<Composition> {
  const keepStacks = options.verbose === true
  const composition = await withoutFrameworkStacks(keepStacks, () => composeRuntime(options))
  return { ...composition, dispose: () => withoutFrameworkStacks(keepStacks, () => composition.dispose()) }
}

async function composeRuntime(options: RuntimeOptions): Promise<Composition> {
  // Before anything is loaded or started: a project's dsh.yml the user has not trusted is refused.
  const choice = chooseConfig(options)
  if (choice.kind === 'untrusted') throw new CompositionError('CONFIG_UNTRUSTED', choice.refusal)
  const configFile = chosenFile(choice)
  const user = choice.kind === 'project' ? parseEntries(choice.text, choice.file) : configFile ? await readEntries(configFile) : []
  const ctx = new Context()
  const logger = attachConsoleLogger(ctx, options.verbose)
  const underFile = mergeEntries(defaultEntries(options), options.extra ?? [])
  const merged = mergeEntries(mergeEntries(underFile, user), commandLineEntries(options))
  // The hooks entry runs a project's hook files only where the user trusted them (dsh trust).
  const entries = withProjectHookTrust(withHelperMcp(withSkills(withAgentDefinitions(merged, user, !options.ignoreDiscoveredConfig), user, !options.ignoreDiscoveredConfig), user), dshHome())
  exportSessionDir(entries)
  try {
    // The file as written, whatever the flags say: `config check` and every run refuse the same file.
    await checkEntries(entriesAsWritten(underFile, user))
    const composition = await compose(ctx, entries)
    const unstarted = helperServersUnstarted(ctx)
    if (unstarted !== undefined) ctx.logger('dsh').warn(unstarted)
    if (options.checkReady) await assertReady(composition, options.model !== undefined)
    // Adapters register as their plugins start: only now can the price table's models be checked.
    const unpriceable = ctx.llm.unknownPricedModels()
    if (unpriceable.length) throw new CompositionError('UNRESOLVED', unpriceable.join('; '), { entryIds: ['llm'] })
    logger.started(false)
    return composition
  } catch (error) {
    logger.started(true)
    const disposed = ctx.fiber.dispose().catch((disposeError: unknown) => {
      // The composition error is what the user must see; a failed clean-up is only noted.
      process.stderr.write(`dsh: cleaning up after a failed start also failed: ${errorMessage(disposeError)}\n`)
    })
    // Cordis unloads a plugin only after its start finished: one whose start never ends
    // would hold the error back forever, so report without waiting for it.
    if (!(error instanceof CompositionError && error.code === 'PLUGIN_WAITING')) await disposed
    // Name the file a faulty entry came from: that is where the user goes to fix it. A
    // problem elsewhere (a --model, a default entry) is not the file's.
    if (error instanceof CompositionError) {
      const fromFile = configFile !== undefined && error.entryIds.some((id) => user.some((entry) => entry.id === id))
      throw new CompositionError(error.code, `dsh: ${fromFile ? `config ${configFile}: ` : ''}${error.message}`, { cause: error, entryIds: error.entryIds })
    }
    throw error
  }
}

/**
 * What would make a composed runtime fail at its first use, found before any session is
 * created: a subagent tool that is not mounted (its provider is not registered, or cannot
 * honour the tool's config; a provider that registered after the tool could only say so
 * in the log), and a model spec that names no loaded adapter or a script or recording
 * that cannot be used. One line per problem.
 */
export async function readinessProblems(runtime: Composition): Promise<string[]> {
  return (await readiness(runtime, false)).map((problem) => problem.text)
}

/** A readiness problem and the entry it is in (the model's when the model is the problem). */
interface ReadinessProblem {
  text: string
  entryId: string
}

async function readiness(runtime: Composition, modelFromFlag: boolean): Promise<ReadinessProblem[]> {
  const subagents = runtime.ctx.get('subagents')
  const registered = subagents?.list() ?? []
  const problems = runtime.entries
    .filter((entry) => entry.name === '@dsh/tool-subagent' && entry.config?.helpers !== true)
    .flatMap((entry) => {
      const config = entry.config ?? {}
      const provider = String(config.provider ?? '')
      const problem = subagentToolMountProblem(
        {
          provider,
          toolName: String(config.toolName ?? 'subagent'),
          backgroundMode: config.backgroundMode === 'continuable' ? 'continuable' : 'one-shot',
          ...(typeof config.maxDepth === 'number' && { maxDepth: config.maxDepth }),
          ...((config.workspace === 'worktree' || config.workspace === 'copy') && { workspace: config.workspace }),
          ...((config.sandbox === true || config.sandbox === 'no-network') && { sandbox: config.sandbox }),
        },
        subagents?.getProvider(provider),
        registered,
      )
      if (problem) return [{ text: `${problem.message} (entry "${entry.id}")`, entryId: entry.id }]
      // A tool that confines its children's commands needs a machine that can.
      const confined = config.sandbox === true || config.sandbox === 'no-network' ? sandboxProblemOf(runtime.ctx) : undefined
      return confined ? [{ text: `tool "${String(config.toolName ?? 'subagent')}" sets sandbox, but ${confined} (entry "${entry.id}")`, entryId: entry.id }] : []
    })
  const subagentsEntry = runtime.entries.find((entry) => entry.name === '@dsh/subagent')?.id ?? 'subagents'
  for (const text of subagents?.treeLimitProblems() ?? []) problems.push({ text, entryId: subagentsEntry })
  const definitionsEntry = runtime.entries.find((entry) => entry.name === '@dsh/agent-definitions')?.id ?? DEFINITIONS_ENTRY_ID
  for (const text of await definitionReadiness(runtime.ctx)) problems.push({ text, entryId: definitionsEntry })
  if (runtime.ctx.llm.config.model) {
    try {
      const { adapter, model } = runtime.ctx.llm.resolve()
      await adapter.prepare?.(model)
    } catch (error) {
      problems.push({ text: oneLineMessage(error), entryId: modelFromFlag ? '--model' : 'llm' })
    }
  }
  return problems
}

/** Fail (exit 2, one line) when `readinessProblems` finds anything. */
async function assertReady(runtime: Composition, modelFromFlag: boolean): Promise<void> {
  const problems = await readiness(runtime, modelFromFlag)
  if (problems.length > 0) throw new CompositionError('UNRESOLVED', problems.map((problem) => problem.text).join('; '), { entryIds: problems.map((problem) => problem.entryId) })
}
