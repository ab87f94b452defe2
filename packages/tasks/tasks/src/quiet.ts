import { errorMessage } from '@dsh/base'
import type { Agent, TurnResult } from '@dsh/agent'
import { selectOutput, type AssistantMessage, type TextBlock, type UserMessage } from '@dsh/llm'
import type { TaskService } from './service.js'

/**
 * Work an agent owns beyond its own turns, which a run waits for: `ctx.tasks` is one (its
 * tasks and every work source registered with it), and a work source is one (the
 * continuable children of `ctx.subagents`). Settling may queue a notice that starts a turn
 * of the owner.
 */
export interface OwnedWork {
  /** Some of `owner`'s work is still running. */
  hasLive(owner: string): boolean
  /** Resolves at the next settlement of `owner`'s work (at once when none runs), after its notice is queued. */
  whenSettled(owner: string): Promise<void>
  /** Stop all of `owner`'s running work without notices; resolves once it has stopped. Never rejects. */
  killAll(owner: string, reason: string): Promise<void>
}

/**
 * Resolve once `agent` is idle and none of its owned work is live: the one definition of
 * "the agent is quiet". Work that settles queues a notice (a new turn), which the next
 * `whenIdle` then waits for; so this is "the work the agent started has all ended". With
 * no owned work it is `whenIdle`.
 */
export async function whenQuiet(agent: { id: string; whenIdle(): Promise<void> }, work: OwnedWork | undefined): Promise<void> {
  for (;;) {
    await agent.whenIdle()
    if (work === undefined || !work.hasLive(agent.id)) return
    await work.whenSettled(agent.id)
  }
}

/** What `runUntilQuiet` reports. */
export interface QuietRun {
  /** The last turn this run covered: a notice turn that fails is the run's outcome. */
  last: TurnResult
  /** The answer, by the shared output-selection rule over every turn this run covered. */
  output: TextBlock[]
  /** The signal aborted: `last.reason` is then `aborted`, and the session records it. */
  cancelled: boolean
}

export interface QuietRunOptions {
  /** The registry of owned work, when loaded: the agent's live work (tasks, continuable children) is waited for, and stopped on cancel. */
  tasks?: TaskService
  /** Aborting it cancels the running turn and stops the agent's live work. */
  signal?: AbortSignal
}

/**
 * Run `input` as a followup turn, then every turn that notices of its owned work start,
 * until the agent is quiet (`whenQuiet`): what a command or a prompt waits for before it
 * answers.
 *
 * Cancelling is one act here: an aborted `signal` cancels the agent's turn and kills its
 * live tasks. A cancel that lands after the last turn ended (the run was waiting on
 * background work) is recorded in the session as a step-less turn ending `aborted`, so a
 * cancelled run never reads `completed`, in the result or in the log.
 */
export async function runUntilQuiet(agent: Agent, input: string | UserMessage, options: QuietRunOptions = {}): Promise<QuietRun> {
  const { tasks, signal } = options
  const answers: AssistantMessage[] = []
  let streamed = ''
  let last: TurnResult | undefined
  let turnStartSeq = 0
  // Only four kinds of update matter here; every other kind passes by.
  const stopWatching = agent.session.subscribe((update) => {
    if (update.type === 'turn/start') turnStartSeq = update.seq
    else if (update.type === 'assistant/chunk' && update.kind === 'text') streamed += update.text
    else if (update.type === 'assistant/message') answers.push(update.message)
    else if (update.type === 'turn/end') {
      last = { turn: update.turn, reason: update.reason, startSeq: turnStartSeq, endSeq: update.seq, ...(update.error !== undefined && { error: update.error }) }
    }
  })

  let cancelCause: unknown
  let cancelled = false
  const cancel = () => {
    if (cancelled) return
    cancelled = true
    cancelCause = signal?.reason
    agent.cancel(cancelCause ?? new Error('cancelled'))
    // killAll never rejects (a task's settlement is always recorded), but a host must not
    // be taken down if that ever changes: the wait below still sees the work settle.
    tasks?.killAll(agent.id, `cancelled: ${describeCause(cancelCause)}`).catch(() => {})
  }

  try {
    const first = agent.followup(input)
    // Queued before the cancel, so an already-aborted signal aborts this turn before it starts.
    if (signal?.aborted) cancel()
    else signal?.addEventListener('abort', cancel, { once: true })
    const firstResult = await first
    await whenQuiet(agent, tasks)
    last ??= firstResult
    if (cancelled && last.reason !== 'aborted') {
      const why = `cancelled after the turn ended: ${describeCause(cancelCause)}`
      // An agent disposed meanwhile (a second Ctrl-C) has a released session: nothing can
      // be recorded, but the run still reports the cancel.
      const live = agent.status === 'idle' || agent.status === 'running'
      last = live ? await agent.recordAbort(why) : { ...last, reason: 'aborted', error: why }
    }
    return { last, output: selectOutput(answers, streamed), cancelled }
  } finally {
    signal?.removeEventListener('abort', cancel)
    stopWatching()
  }
}

function describeCause(cause: unknown): string {
  return cause === undefined ? 'cancelled' : errorMessage(cause)
}
