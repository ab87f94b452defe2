/**
 * The served side of a delegation: what a host does with one it received from a parent in
 * another process (`dsh acp`'s session, `dsh a2a serve`'s task, `dsh worker`'s job), so the
 * three keep only their wire. One line, in order:
 *
 *   lineage in → `admitDelegation` (the depth bound) → `openDelegation` (the agent, made
 *   with the lineage's header; its recording link adopted; bounded by the lineage's
 *   budget) → `runDelegation` (its progress followed, its whole subtree's usage counted,
 *   run until quiet) → dispose → result and usage out.
 *
 * `serveDelegation` is the whole line for a one-shot host (a task, a job); ACP, whose
 * session outlives a prompt, calls the steps itself.
 *
 * The usage a host reports is its whole subtree's, counted one way on every host: the
 * served agent's own model calls (from this run on) and every run below it in this process
 * (each run's cumulative usage as its progress and its end tell it), each figure turned
 * into what it adds by the tree gate's `advance`, so a parent counts what a worker's own
 * children spent against the budget it handed the worker.
 */
import type { Context } from 'cordis'
import { resolve as resolvePath } from 'node:path'
import { errorMessage } from '@dsh/base'
import type { Agent, CreateAgentOptions } from '@dsh/agent'
import { text, type UserMessage } from '@dsh/llm'
import { runUntilQuiet, type QuietRun } from '@dsh/tasks'
import { admitDepth, tighterBound } from './admission.js'
import { SubagentError } from './errors.js'
import { lineageHeader, type ReceivedLineage } from './lineage.js'
import { followLocalChild, noUsage } from './progress/local.js'
import { advance } from './tree-usage.js'
import type { ProgressSink, SubagentUsage } from './types.js'

/** The host that serves a delegation, as its refusals name it. */
export interface ServedHost {
  /** The deepest delegation this host accepts (the tighter of it and the lineage's holds). */
  maxDepth: number
  /** The delegation, with its verb: "this session would be", "this task would run". */
  subject: string
  /** This host's bound, as a refusal names it: "this server's", "this worker's". */
  own: string
}

/** A delegation whose depth this host admitted: what `openDelegation` makes an agent of. */
export interface AdmittedDelegation {
  readonly lineage: ReceivedLineage
  /** The tighter of the host's depth bound and the lineage's: the session records it, so its own delegations stay within it. */
  readonly maxDepth: number
}

/**
 * Admit a delegation received with `lineage`, or throw why not (`DEPTH_LIMIT`, naming the
 * bound it broke). Refused before anything exists: a parent recursing through served
 * processes would otherwise nest without limit, one process per generation. `recorded`:
 * the header of a stored session the delegation continues (its depth and bound, not the
 * message's, are the ones that hold).
 */
export function admitDelegation(host: ServedHost, lineage: ReceivedLineage, recorded?: { delegationDepth?: number; maxDepth?: number }): AdmittedDelegation {
  const { delegationDepth, maxDepth } = recorded ?? lineage
  admitDepth(delegationDepth ?? 0, host.maxDepth, maxDepth, {
    subject: host.subject,
    bound: (limit, whose) => `${whose === 'own' ? host.own : "the delegating parent's"} maxDepth ${limit}`,
  })
  return { lineage, maxDepth: tighterBound(host.maxDepth, lineage.maxDepth)! }
}

/** A recording link refused: `grant` when it names another directory than the host's grant, else its adoption failed. */
export class RecordingRefused extends SubagentError {
  constructor(
    readonly grant: boolean,
    message: string,
    options?: ErrorOptions,
  ) {
    super('INVALID_REQUEST', message, options)
  }
}

export interface OpenDelegationOptions {
  /** Header fields beside the lineage's (`origin`, `cwd`, a reserved `id`, a helper's name and hash, the attempt). */
  meta: NonNullable<CreateAgentOptions['meta']>
  /** The provider the header names when the lineage names none (the host's wire). */
  provider?: string
  /** A tighter depth bound than the admitted one (a helper's own `maxDepth`). */
  maxDepth?: number
  /** How the agent is made beside its header: a helper's persona, model and tool filter. */
  agentOptions?: CreateAgentOptions['agentOptions']
  setup?: CreateAgentOptions['setup']
  /** Reopen this stored session (a conversation continued) instead of making one: its header already holds its lineage. */
  sessionId?: string
  /**
   * The only directory a lineage's recording link may record into or replay from: the one
   * the process that started this host granted. Without it every link is refused: a
   * caller cannot make the host write files by asking.
   */
  recordingDir?: string
}

/**
 * Make the agent of an admitted delegation: its header holds the lineage (and the depth
 * bound), it records or replays its model calls as its parent does when the lineage links
 * a recording (before its first call, or not at all: `RecordingRefused`), and a budget the
 * parent handed it holds from its first model call, not only once it delegates.
 */
export async function openDelegation(ctx: Context, admitted: AdmittedDelegation, options: OpenDelegationOptions): Promise<Agent> {
  const { lineage } = admitted
  const { recording } = lineage
  if (recording && (options.recordingDir === undefined || resolvePath(recording.dir) !== resolvePath(options.recordingDir))) {
    throw new RecordingRefused(true, `this server records or replays only into the directory the process that started it granted (${options.recordingDir ?? 'none'}), not ${recording.dir}`)
  }
  const made: CreateAgentOptions = {}
  if (options.agentOptions !== undefined) made.agentOptions = options.agentOptions
  if (options.setup !== undefined) made.setup = options.setup
  const agent = await ctx.agents.create(
    options.sessionId !== undefined
      ? { ...made, sessionId: options.sessionId }
      : {
          ...made,
          meta: {
            ...options.meta,
            ...lineageHeader(lineage),
            ...(options.provider !== undefined && { provider: lineage.provider ?? options.provider }),
            maxDepth: tighterBound(admitted.maxDepth, options.maxDepth),
          },
        },
  )
  if (recording && options.sessionId === undefined) {
    try {
      ctx.llm.adoptRecordingLink(agent.id, recording)
    } catch (error) {
      await agent.dispose()
      throw new RecordingRefused(false, `cannot ${recording.mode} this session's model calls: ${errorMessage(error)}`, { cause: error })
    }
  }
  await ctx.get('subagents')?.boundByLineage(agent)
  return agent
}

export interface RunDelegationOptions {
  /** Aborting it cancels the run, and the agent's tasks and children. */
  signal?: AbortSignal
  /** The agent's own progress (text, tool calls), read from its session as an in-process child's is; usage comes as `onUsage`. */
  progress?: ProgressSink
  /** How progress shows a tool call's arguments and a failed call's result (default: one display line, `summariseArgs`). */
  shape?: (value: unknown) => string
  /** The whole subtree's usage so far, each time it grows. */
  onUsage?(usage: SubagentUsage): void
}

/** How a served run ended: the quiet run, its answer's text, and what its whole subtree used. */
export interface ServedRun extends QuietRun {
  /** The answer: the output blocks' text. */
  answer: string
  /** What the agent's model calls in this run and every run below it used (zeros when nothing said). */
  usage: SubagentUsage
  /** Whether any model call reported usage. */
  usageReported: boolean
}

/** Run `prompt` on a served agent until it is quiet (its tasks and continuable children), following its progress and its subtree's usage. */
export async function runDelegation(ctx: Context, agent: Agent, prompt: string | UserMessage, options: RunDelegationOptions = {}): Promise<ServedRun> {
  const usage = new SubtreeUsage(ctx, agent, options.onUsage)
  // From this turn on: a reopened session's earlier turns were reported when they ran.
  const unfollow = followLocalChild(
    agent.session,
    {
      report: (update) => {
        if (update.kind === 'usage') usage.add('', update.usage)
        else options.progress?.report(update)
      },
    },
    { replay: false, ...(options.shape !== undefined && { shape: options.shape }) },
  )
  try {
    const message: UserMessage = typeof prompt === 'string' ? { role: 'user', content: [text(prompt)] } : prompt
    const quiet = await runUntilQuiet(agent, message, { tasks: ctx.get('tasks'), signal: options.signal })
    return { ...quiet, answer: quiet.output.map((block) => block.text).join(''), usage: { ...usage.total }, usageReported: usage.reported }
  } finally {
    unfollow()
    usage.stop()
  }
}

export interface ServeDelegationOptions extends OpenDelegationOptions, RunDelegationOptions {
  prompt: string | UserMessage
  /** Told the agent once it is made (before it runs); what it returns is called before the agent is disposed. */
  opened?(agent: Agent): (() => void) | void
  /** Disposing the agent failed (the run's outcome stands). */
  disposeFailed?(error: unknown): void
}

/** The whole served line for a one-shot delegation: open the agent, run it until quiet, dispose it (flushing its session) and return how it ended. */
export async function serveDelegation(ctx: Context, admitted: AdmittedDelegation, options: ServeDelegationOptions): Promise<ServedRun & { agentId: string }> {
  const agent = await openDelegation(ctx, admitted, options)
  let closing: (() => void) | void = undefined
  try {
    closing = options.opened?.(agent)
    const run = await runDelegation(ctx, agent, options.prompt, options)
    return { ...run, agentId: agent.id }
  } finally {
    closing?.()
    // Flushed and released before the host answers: the conversation's next message may reopen it at once.
    await agent.dispose().catch((error: unknown) => options.disposeFailed?.(error))
  }
}

/**
 * What a served agent and every run below it in this process used, while it runs: each
 * source (the agent's own calls, each run below it by run id) reports cumulative figures,
 * and only what goes past the highest figure counted of that source is added.
 */
class SubtreeUsage {
  readonly total = noUsage()
  reported = false
  private readonly counted = new Map<string, SubagentUsage>()
  private readonly off: Array<() => void>

  constructor(
    private readonly ctx: Context,
    private readonly root: Agent,
    private readonly onUsage: ((usage: SubagentUsage) => void) | undefined,
  ) {
    this.off = [
      ctx.on('subagent/progress', (info) => {
        if (!this.below(info.parentId)) return
        for (const update of info.updates) if (update.kind === 'usage') this.add(info.runId, update.usage)
      }),
      ctx.on('subagent/end', (info) => {
        if (info.usage !== undefined && this.below(info.parentId)) this.add(info.runId, info.usage)
      }),
    ]
  }

  /** Count `usage`, the cumulative figures of `source` ('' the root's own calls). */
  add(source: string, usage: SubagentUsage): void {
    this.reported = true
    let counted = this.counted.get(source)
    if (counted === undefined) this.counted.set(source, (counted = noUsage()))
    const cached = Math.max(0, usage.cachedInputTokens - counted.cachedInputTokens)
    counted.cachedInputTokens += cached
    const added = advance(counted, usage)
    if (added === undefined && cached === 0) return
    this.total.inputTokens += added?.inputTokens ?? 0
    this.total.outputTokens += added?.outputTokens ?? 0
    this.total.cachedInputTokens += cached
    this.onUsage?.({ ...this.total })
  }

  stop(): void {
    for (const off of this.off) off()
  }

  /** Whether a run whose parent is `parentId` is in the served agent's tree. */
  private below(parentId: string): boolean {
    const agent = this.ctx.agents.get(parentId)
    if (agent === undefined) return false
    if (agent.id === this.root.id) return true
    for (const above of agent.ancestors()) if (above.id === this.root.id) return true
    return false
  }
}
