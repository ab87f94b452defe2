import { errorMessage } from '@dsh/base'
import type { Agent, TurnResult } from '@dsh/agent'
import { selectOutput, type AssistantMessage, type TextBlock, type UserMessage } from '@dsh/llm'
import type { TaskService } from './service.js'

/**
 * Work an agent owns beyond its own turns, which a run waits for: background tasks
 * (`ctx.tasks`), continuable children (`ctx.subagents.continuation`). Settling may queue
 * a notice that starts a turn of the owner.
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
 * Resolve once `agent` is idle and none of its owned work is live. Work that settles
 * queues a notice (a new turn), which the next `whenIdle` then waits for; so this is "the
 * work the agent started has all ended". With no owned work it is `whenIdle`.
 */
export async function whenQuiet(agent: { id: string; whenIdle(): Promise<void> }, work: TaskService | readonly OwnedWork[] | undefined): Promise<void> {
  const all: readonly OwnedWork[] = work === undefined ? [] : Array.isArray(work) ? work : [work as OwnedWork]
  for (;;) {
    await agent.whenIdle()
    const live = all.filter((entry) => entry.hasLive(agent.id))
    if (live.length === 0) return
    await Promise.race(live.map((entry) => entry.whenSettled(agent.id)))
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
  /** The task runtime, when loaded: its live tasks are waited for, and killed on cancel. */
  tasks?: TaskService
  /** More owned work to wait for and stop on cancel (continuable children). */
  work?: readonly OwnedWork[]
  /** Aborting it cancels the running turn and kills the agent's live tasks. */
  signal?: AbortSignal
}

/**
 * Run `input` as a followup turn, then every turn that background-completion notices
 * start, until the agent is idle and no task of its is live: what a command or a prompt
 * waits for before it answers.
 *
 * Cancelling is one act here: an aborted `signal` cancels the agent's turn and kills its
 * live tasks. A cancel that lands after the last turn ended (the run was waiting on
 * background work) is recorded in the session as a step-less turn ending `aborted`, so a
 * cancelled run never reads `completed`, in the result or in the log.
 */
export async function runUntilQuiet(agent: Agent, input: string | UserMessage, options: QuietRunOptions = {}): Promise<QuietRun> {
  const { tasks, signal } = options
  const owned: OwnedWork[] = [...(tasks ? [tasks] : []), ...(options.work ?? [])]
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
    // be taken down if that ever changes: the wait below still sees the tasks settle.
    for (const work of owned) work.killAll(agent.id, `cancelled: ${describeCause(cancelCause)}`).catch(() => {})
  }

  try {
    const first = agent.followup(input)
    // Queued before the cancel, so an already-aborted signal aborts this turn before it starts.
    if (signal?.aborted) cancel()
    else signal?.addEventListener('abort', cancel, { once: true })
    const firstResult = await first
    await whenQuiet(agent, owned)
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
