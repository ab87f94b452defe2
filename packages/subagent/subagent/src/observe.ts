/**
 * What `ctx.subagents` tells its listeners: the observe-only lifecycle events, and the
 * observe stage of the start pipeline (`start-pipeline.ts`): a one-shot run's progress
 * channel and its `subagent/start` and `subagent/end`, built only when somebody hears them.
 */
import { randomBytes } from 'node:crypto'
import type { Context } from 'cordis'
import { errorMessage } from '@dsh/base'
import type { TextBlock } from '@dsh/llm'
import type { Session } from '@dsh/session'
import type { SubagentRequest, SubagentResult, SubagentRun, SubagentRunEndInfo, SubagentRunInfo } from './types.js'
import { ProgressChannel } from './progress/channel.js'
import { followLocalChild, latestTurnUsage } from './progress/local.js'
import type { Delegation, Started } from './start-pipeline.js'

/** The observe-only events of the seam: listeners may throw or reject, never to any effect. */
export type SubagentLifecycleEvent = 'subagent/provider-added' | 'subagent/provider-removed' | 'subagent/start' | 'subagent/end' | 'subagent/progress' | 'subagent/budget' | 'subagent/queued'

type LifecyclePayload<K extends SubagentLifecycleEvent> = Parameters<import('cordis').Events[K]>[0]

/** A deep copy of text blocks (all they hold is two strings; cheaper than `structuredClone`). */
function cloneOutput(output: readonly TextBlock[]): TextBlock[] {
  return output.map((block) => ({ type: 'text', text: block.text }))
}

/** What the observer needs of its service. */
export interface ObserverHost {
  /**
   * The app's event bus, held directly: reaching `parallel` or `events` through a context
   * builds tracing proxies (and a logger) on every call, which a fan-out pays per child.
   */
  readonly events: Context['events']
  /** The service's own context (its logger). */
  readonly home: Context
  /** Least time between two `subagent/progress` events of one run. */
  readonly progressIntervalMs: number
  /** The session of in-process child `id`, while its agent is registered. */
  localSession(id: string): Session | undefined
}

/** The lifecycle events and live progress of one `ctx.subagents`. */
export class RunObserver {
  private runCounter = 0
  private readonly runPrefix = randomBytes(3).toString('hex')

  constructor(private readonly host: ObserverHost) {}

  /** A fresh run id (`subagent/start`'s `runId`). */
  nextRunId(): string {
    return `run-${this.runPrefix}-${++this.runCounter}`
  }

  /**
   * A one-shot run's progress channel and lifecycle events, when anybody hears them; a
   * continuable child's manager announces its own. Nobody to tell and nothing to follow
   * (the common case of a fan-out): no run info, no id and nothing on the result.
   */
  stage(delegation: Delegation, next: () => Promise<Started>): Promise<Started> {
    if (delegation.continuable !== undefined) return next()
    // Progress is built only when somebody listens: otherwise providers get no sink at all.
    const progress = this.openProgress(delegation.request.onProgress)
    if (progress !== undefined) delegation.added.progress = progress
    if (progress === undefined && !this.heard('subagent/start') && !this.heard('subagent/end')) return next()
    return this.startFollowed(delegation, next as () => Promise<SubagentRun>, progress)
  }

  /** `start` for a run somebody hears of: its lifecycle events and its progress channel. */
  private async startFollowed(delegation: Delegation, next: () => Promise<SubagentRun>, progress: ProgressChannel | undefined): Promise<SubagentRun> {
    const { name, request } = delegation
    let run: SubagentRun
    try {
      run = await next()
    } catch (error) {
      progress?.close()
      throw error
    }
    const info: SubagentRunInfo = {
      runId: this.nextRunId(),
      provider: name,
      id: run.id,
      local: run.local,
      parentId: request.parent.id,
    }
    if (request.label !== undefined) info.label = request.label
    if (request.callId !== undefined) info.callId = request.callId
    if (request.helper !== undefined) info.helper = request.helper.name
    this.notify('subagent/start', info)
    let unfollow: (() => void) | undefined
    if (progress !== undefined) {
      progress.bind(info)
      const session = run.local ? this.host.localSession(run.id) : undefined
      if (session !== undefined) unfollow = followLocalChild(session, progress)
    }
    // Attached before the caller sees the run, so `end` is emitted before the caller's
    // own continuation; the clone keeps a mutating listener away from the caller's result.
    run.result.then(
      (result) => {
        unfollow?.()
        progress?.close()
        if (!this.heard('subagent/end')) return
        const end: SubagentRunEndInfo = { ...info, stopReason: result.stopReason }
        if (result.diagnostic !== undefined) end.diagnostic = result.diagnostic
        if (result.output.length > 0) end.lastAssistantMessage = cloneOutput(result.output)
        const usage = this.usageOf(run, result)
        if (usage !== undefined) end.usage = usage
        this.notify('subagent/end', end)
      },
      (error: unknown) => {
        unfollow?.()
        progress?.close()
        this.notify('subagent/end', { ...info, stopReason: 'error', diagnostic: `the run failed: ${errorMessage(error)}` })
      },
    )
    return run
  }

  /**
   * A progress channel for one run, or `undefined` when nobody would hear it (no
   * `subagent/progress` listener and no caller observer): then nothing is built at all.
   */
  openProgress(observer: SubagentRequest['onProgress']): ProgressChannel | undefined {
    if (observer === undefined && !this.heard('subagent/progress')) return undefined
    // Made only to report a failure: a logger built through the context costs a fan-out per child.
    const log = () => this.host.home.logger('subagents')
    return new ProgressChannel({
      intervalMs: this.host.progressIntervalMs,
      emit: (info) => {
        this.notify('subagent/progress', info)
        if (observer === undefined) return
        try {
          observer(info)
        } catch (error) {
          log().warn('a progress observer failed (ignored): %s', errorMessage(error))
        }
      },
      onMalformed: (reason) => log().debug('a progress update was dropped: %s', reason),
    })
  }

  /** What a run used: the provider's figure, else an in-process child's own log. */
  private usageOf(run: SubagentRun, result: SubagentResult) {
    if (result.usage !== undefined) return { ...result.usage }
    if (!run.local) return undefined
    const session = this.host.localSession(run.id)
    return session === undefined ? undefined : latestTurnUsage(session)
  }

  /**
   * Emit an observe-only event to every `ctx.on(name, …)` listener, whichever plugin
   * registered it and whenever (before this service existed too). Cordis's `parallel`
   * calls each listener at once, in registration order, and gathers what each throws or
   * rejects; nothing waits for it here, so a listener affects neither its peers nor the
   * run, and a failure is logged instead of becoming an unhandled rejection.
   */
  notify<K extends SubagentLifecycleEvent>(name: K, payload: LifecyclePayload<K>): void {
    if (!this.heard(name)) return
    const events = this.host.events as unknown as { parallel(name: K, payload: LifecyclePayload<K>): Promise<void> }
    const emitted = events.parallel(name, payload)
    emitted.catch((error: unknown) => {
      const log = this.host.home.logger('subagents')
      const failures = error instanceof AggregateError ? error.errors : [error]
      for (const failure of failures) log.warn('a %s listener failed (ignored): %s', name, errorMessage(failure))
    })
  }

  /**
   * Whether emitting `name` would reach anyone: a listener of it, or of every dispatch.
   * Cordis keeps listeners per event name in `events._hooks` (public in its typings);
   * counting them is the only way to know that nobody listens without emitting, and then
   * the payload need not even be built.
   */
  heard(name: SubagentLifecycleEvent): boolean {
    const hooks = this.host.events._hooks
    return (hooks[name]?.length ?? 0) > 0 || (hooks['internal/dispatch']?.length ?? 0) > 0
  }
}
