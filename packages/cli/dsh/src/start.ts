/**
 * Waiting for a composition to start, from Cordis's own lifecycle events: every fiber
 * reports its state changes (`internal/status`) and every service change is announced
 * (`internal/service`). The composition has started when every fiber is active. It is
 * stuck when nothing is loading any more and some fiber still waits: the services it
 * injects will never appear, so it is reported by name instead of hanging.
 */
import { type Context, type Fiber, FiberState } from 'cordis'
import type { PluginEntry } from './config-entries.js'
import { CompositionError, oneLineMessage } from './errors.js'

export interface StartOptions {
  /**
   * The longest a plugin may stay loading (an async start that never finishes) before
   * the composition gives up on it. Waiting for a missing service is reported as soon
   * as nothing else can move, without waiting this long.
   */
  startTimeoutMs: number
  /** Stop waiting (and listening) without settling: another failure was reported first. */
  signal?: AbortSignal
}

/** Resolves once every fiber is active; rejects naming the plugins that failed or wait. */
export function waitForStart(ctx: Context, entries: readonly PluginEntry[], fibers: ReadonlyMap<string, Fiber>, options: StartOptions): Promise<void> {
  return new Promise<void>((resolvePromise, reject) => {
    const stopListening: (() => void)[] = []
    let scheduled: NodeJS.Immediate | undefined
    const finish = (error?: CompositionError) => {
      for (const stop of stopListening.splice(0)) stop()
      clearTimeout(timer)
      if (scheduled) clearImmediate(scheduled)
      if (error) reject(error)
      else resolvePromise()
    }
    const missingServices = (entry: PluginEntry) => Object.keys(fibers.get(entry.id)!.inject ?? {}).filter((name) => ctx.get(name) === undefined)
    const waitingReport = (headline: string) => {
      const waiting = entries.filter((entry) => fibers.get(entry.id)!.state !== FiberState.ACTIVE)
      const lines = waiting
        .map((entry) => {
          const missing = missingServices(entry)
          return `"${entry.id}" (${entry.name}) is waiting for ${missing.length ? missing.map((name) => `ctx.${name}`).join(', ') : 'its start to finish'}`
        })
      return new CompositionError('PLUGIN_WAITING', `${headline}: ${lines.join('; ')}`, { entryIds: waiting.map((entry) => entry.id) })
    }
    const evaluate = () => {
      scheduled = undefined
      const states = entries.map((entry) => [entry, fibers.get(entry.id)!.state] as const)
      const failed = states.find(([, state]) => state === FiberState.FAILED)
      if (failed) {
        const [entry] = failed
        // A failed fiber keeps its error; awaiting it hands the error over.
        return void fibers.get(entry.id)!.await().then(
          () => finish(new CompositionError('PLUGIN_START', `plugin "${entry.id}" (${entry.name}) failed to start`, { entryIds: [entry.id] })),
          (error: unknown) => finish(new CompositionError('PLUGIN_START', `plugin "${entry.id}" (${entry.name}) failed to start: ${oneLineMessage(error)}`, { entryIds: [entry.id] })),
        )
      }
      if (states.every(([, state]) => state === FiberState.ACTIVE)) return finish()
      const moving = states.some(([, state]) => state === FiberState.LOADING || state === FiberState.UNLOADING)
      if (!moving && states.some(([entry, state]) => state === FiberState.PENDING && missingServices(entry).length > 0)) {
        return finish(waitingReport('some plugins did not start'))
      }
    }
    // A state change is announced before the services it makes available are passed on
    // to the fibers that wait for them: look once the current burst of changes is over.
    const schedule = () => {
      scheduled ??= setImmediate(evaluate)
    }
    stopListening.push(ctx.on('internal/status', schedule), ctx.on('internal/service', schedule))
    options.signal?.addEventListener('abort', () => finish(), { once: true })
    const timer = setTimeout(() => finish(waitingReport(`some plugins did not start within ${options.startTimeoutMs} ms`)), options.startTimeoutMs)
    schedule()
  })
}
