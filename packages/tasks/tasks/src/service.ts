import { Context, Service } from 'cordis'
import Schema from 'schemastery'
import { errorMessage } from '@dsh/base'
import { serviceInstance } from '@dsh/agent'
import { TaskError } from './errors.js'
import { TaskRecord } from './task.js'
import { NoticeDesk, type TaskNoticeRenderer } from './notices.js'
import type { OwnedWork } from './quiet.js'
import type { TaskInfo, TaskRead, TaskRegistration, TaskReservation, TaskSettledListener } from './types.js'

declare module 'cordis' {
  interface Context {
    tasks: TaskService
  }
}

const KIND = /^[a-z][a-z0-9_]{0,31}$/

/** Longest `wait` the registry accepts, so a forgotten waiter cannot pin a task forever. */
export const MAX_WAIT_MS = 600_000

/**
 * `ctx.tasks`: the one registry of owned work. Its own entries are background tasks
 * (background subagents, background commands): producers register work with a `cancel`
 * and a `done`; owners read, wait on and kill it through the registry, which fences every
 * access by owner, bounds how much live work one owner may have, and stops an owner's work
 * when the owner is disposed (the agent registry awaits that before releasing the owner's
 * session). Other kinds of owned work register as work sources (`addWorkSource`: the
 * continuable children of `ctx.subagents`), so "an agent is quiet" (`hasLive`,
 * `whenSettled`, `killAll`) has one definition. What owned work tells its owner goes
 * through one notice path, `notices`, with one bound on the turns notices start.
 */
export class TaskService extends Service implements OwnedWork {
  static inject = ['agents']
  static Config: Schema<TaskService.Config> = Schema.object({
    maxLiveTasksPerOwner: Schema.natural().min(1).default(10).description('Most live (running) tasks one owner may have at a time.'),
    maxConsecutiveWakeups: Schema.natural().default(10).description('Most turns notices may start in a row for one agent without other input; 0: never wake, only inject into running turns.'),
  })

  /** The one notice path of owned work (see `NoticeDesk`). */
  readonly notices: NoticeDesk
  private sources: OwnedWork[] = []
  private renderers: Array<{ surface: string; render: TaskNoticeRenderer }> = []
  private tasks = new Map<string, TaskRecord>()
  /** Slots reserved and not yet bound to a task, per owner (`undefined`: unowned work). */
  private reserved = new Map<string | undefined, number>()
  private counters = new Map<string, number>()
  private surfaces: string[] = []
  private listeners: TaskSettledListener[] = []
  private ownerWaiters = new Map<string, Array<() => void>>()
  /** This service's own context: `this.ctx` is the caller's (services are reached through proxies). */
  private readonly home: Context

  constructor(ctx: Context, public config: TaskService.Config) {
    super(ctx, 'tasks')
    this.home = ctx
    const agents = serviceInstance(ctx.agents)
    this.notices = new NoticeDesk(this, () => agents, config.maxConsecutiveWakeups ?? 10, () => ctx.logger('tasks'))
    ctx.agents.onCleanup((agent) => this.releaseOwner(agent.id))
    // Notices accepted for an agent before its last process ended wait for it again.
    ctx.agents.onResume((agent) => this.notices.resumed(agent))
    ctx.effect(() => () => this.shutdown(), 'tasks: stop every live task')
  }

  /**
   * Declare a surface through which owners collect and stop tasks (`@dsh/tool-tasks`
   * does), with the wording of its task notices. Without one, `register` fails: work
   * nobody can collect or stop is a misconfiguration, not a feature. An effect of the
   * calling context.
   */
  attachSurface(name: string, options: { renderNotice?: TaskNoticeRenderer } = {}): () => void {
    const { renderNotice } = options
    return this.ctx.effect(() => {
      this.surfaces = [...this.surfaces, name]
      if (renderNotice) this.renderers = [...this.renderers, { surface: name, render: renderNotice }]
      this.notices.renderTasksWith(this.renderers.at(-1)?.render)
      return () => {
        const index = this.surfaces.indexOf(name)
        if (index >= 0) this.surfaces = [...this.surfaces.slice(0, index), ...this.surfaces.slice(index + 1)]
        this.renderers = this.renderers.filter((entry) => entry.surface !== name || entry.render !== renderNotice)
        this.notices.renderTasksWith(this.renderers.at(-1)?.render)
      }
    }, `tasks.attachSurface(${JSON.stringify(name)})`)
  }

  /**
   * Register another kind of owned work (the continuable children of `ctx.subagents`):
   * from then on `hasLive`, `whenSettled` and `killAll` cover it too, so every host's
   * "the agent is quiet" (`runUntilQuiet`) includes it. An effect of the calling context.
   */
  addWorkSource(source: OwnedWork): () => void {
    return this.ctx.effect(() => {
      this.sources = [...this.sources, source]
      return () => {
        this.sources = this.sources.filter((entry) => entry !== source)
      }
    }, 'tasks.addWorkSource()')
  }

  /**
   * Throws the error `reserve` would throw for this kind and owner, without reserving.
   * Prefer `reserve`: a check alone can be overtaken by a parallel start.
   */
  assertAdmission(request: { kind: string; owner?: string }): void {
    const { kind, owner } = request
    if (typeof kind !== 'string' || !KIND.test(kind)) {
      throw new TaskError('INVALID_TASK', `task kind ${JSON.stringify(kind)} must be a lowercase word (letters, digits, "_"; at most 32)`)
    }
    if (this.surfaces.length === 0) {
      throw new TaskError('NO_SURFACE', 'no task surface is loaded, so nobody could collect or stop this task: load @dsh/tool-tasks next to @dsh/tasks')
    }
    const label = owner === undefined ? 'unowned work' : `agent ${owner}`
    this.assertOwnerLive(owner)
    const live = this.liveCount(owner) + (this.reserved.get(owner) ?? 0)
    const max = this.config.maxLiveTasksPerOwner
    if (live >= max) {
      throw new TaskError(
        'LIMIT',
        `${label} already has ${live} live background tasks, the most allowed (maxLiveTasksPerOwner ${max}); free a slot first: wait for one to finish (task_output with wait: true) or stop one (task_kill)`,
      )
    }
  }

  /**
   * Admission, checked and taken in one step, before the producer creates anything: a
   * reserved slot counts against the owner's limit until it is bound to a task
   * (`reservation.register`) or given back (`reservation.release`, when the start fails).
   * Throws what `register` would throw (`INVALID_TASK`, `NO_SURFACE`, `OWNER_GONE`, `LIMIT`).
   */
  reserve(request: { kind: string; owner?: string }): TaskReservation {
    this.assertAdmission(request)
    const { kind, owner } = request
    this.reserved.set(owner, (this.reserved.get(owner) ?? 0) + 1)
    let held = true
    const giveBack = () => {
      if (!held) return false
      held = false
      const left = (this.reserved.get(owner) ?? 1) - 1
      if (left > 0) this.reserved.set(owner, left)
      else this.reserved.delete(owner)
      return true
    }
    return {
      register: (registration) => {
        if (!held) throw new TaskError('INVALID_TASK', 'this reservation was already used or released; reserve a new slot')
        // Bound or refused, the slot is no longer held: a refused registration gives it back.
        giveBack()
        validate(registration)
        // The owner may have been disposed while the producer prepared: its work would be orphaned.
        this.assertOwnerLive(owner)
        return this.insert({ ...registration, kind, ...(owner !== undefined && { owner }) })
      },
      release: () => {
        giveBack()
      },
    }
  }

  /**
   * Register running work; returns its id, `<kind>-N` with N counted per kind from 1.
   * A refused registration consumes no id.
   */
  register(registration: TaskRegistration): string {
    this.assertAdmission(registration)
    validate(registration)
    return this.insert(registration)
  }

  private assertOwnerLive(owner: string | undefined): void {
    if (owner === undefined) return
    const agent = this.home.agents.get(owner)
    if (!agent || agent.status === 'disposing' || agent.status === 'disposed') {
      throw new TaskError('OWNER_GONE', `cannot start a task for agent ${owner}: it is ${agent ? agent.status : 'not a live agent'}`)
    }
  }

  private insert(registration: TaskRegistration): string {
    const number = (this.counters.get(registration.kind) ?? 0) + 1
    this.counters.set(registration.kind, number)
    const id = `${registration.kind}-${number}`
    const log = this.home.logger('tasks')
    const record = new TaskRecord(
      id,
      registration,
      (settled) => this.announce(settled),
      (error) => log.warn('cancelling task %s threw (it must still settle done): %s', id, errorMessage(error)),
    )
    this.tasks.set(id, record)
    return id
  }

  /** The caller's own tasks and unowned ones, oldest first. */
  list(caller: string): TaskInfo[] {
    const infos: TaskInfo[] = []
    for (const record of this.tasks.values()) if (this.visible(record, caller)) infos.push(record.info())
    return infos
  }

  /** A snapshot; never marks the task reported. */
  get(id: string, caller: string): TaskInfo {
    return this.access(id, caller).info()
  }

  /**
   * Stream tasks: the output since the previous read. Final-output tasks: the answer once
   * settled. Reading a settled task marks it reported (its completion notice is no longer
   * news); reading a running one does not, since its settlement is still to come.
   */
  read(id: string, caller: string): TaskRead {
    return this.readRecord(this.access(id, caller))
  }

  /**
   * Wait up to `timeoutMs` (at most `MAX_WAIT_MS`) for the task to settle, then read it.
   * On timeout the read shows `running`. A settlement that a wait returns is reported.
   * Aborting `signal` rejects with `TaskError('ABORTED')`.
   */
  async wait(id: string, caller: string, timeoutMs: number, signal?: AbortSignal): Promise<TaskRead> {
    const record = this.access(id, caller)
    if (record.live && timeoutMs > 0) {
      record.waiters++
      try {
        await settledWithin(record.settled, Math.min(timeoutMs, MAX_WAIT_MS), signal)
      } finally {
        record.waiters--
      }
    }
    return this.readRecord(record)
  }

  /**
   * Stop a task and resolve once its work has stopped. The kill is recorded first, so
   * the task ends `killed` with `reason` unless it had already settled (then this
   * changes nothing and returns it as it is). Either way it is marked reported.
   */
  /**
   * Stop a task and resolve once it has stopped. With `signal` (the calling tool's), the
   * wait ends when the signal aborts (rejecting), so a producer that never settles cannot
   * hold its caller's turn, and Ctrl-C, forever; the kill request itself stands.
   */
  async kill(id: string, caller: string, reason = 'killed by its owner', signal?: AbortSignal): Promise<TaskInfo> {
    const record = this.access(id, caller)
    record.reported = true
    record.cancel(reason)
    await (signal ? settledWithin(record.settled, MAX_WAIT_MS, signal) : record.settled)
    return record.info()
  }

  /**
   * Stop all of `owner`'s live work, its tasks and every work source's (no notices follow),
   * and resolve once all of it has stopped. Never rejects.
   */
  async killAll(owner: string, reason: string): Promise<void> {
    await Promise.all([this.killTasks(owner, reason), ...this.sources.map((source) => source.killAll(owner, reason).catch(() => {}))])
  }

  /** Stop every live task of `owner` (no notices follow) and resolve once all have stopped. */
  private async killTasks(owner: string, reason: string): Promise<void> {
    const live = [...this.tasks.values()].filter((record) => record.owner === owner && record.live)
    for (const record of live) {
      record.reported = true
      record.cancel(reason)
    }
    await Promise.all(live.map((record) => record.settled))
  }

  /** Whether `owner` has owned work that has not stopped yet: a task, or a work source's. */
  hasLive(owner: string): boolean {
    return this.liveCount(owner, true) > 0 || this.sources.some((source) => source.hasLive(owner))
  }

  /** Resolves at the next settlement of `owner`'s owned work (after its notice is queued); at once when none is live. */
  whenSettled(owner: string): Promise<void> {
    if (!this.hasLive(owner)) return Promise.resolve()
    const task = new Promise<void>((resolve) => {
      this.ownerWaiters.set(owner, [...(this.ownerWaiters.get(owner) ?? []), resolve])
    })
    const sources = this.sources.filter((source) => source.hasLive(owner))
    return sources.length === 0 ? task : Promise.race([task, ...sources.map((source) => source.whenSettled(owner))])
  }

  /**
   * `listener(task)` runs once per settlement, after the task's work has stopped and
   * after any `wait` returning it has marked it reported. An effect of the calling context.
   */
  onSettled(listener: TaskSettledListener): () => void {
    return this.ctx.effect(() => {
      this.listeners = [...this.listeners, listener]
      return () => {
        this.listeners = this.listeners.filter((entry) => entry !== listener)
      }
    }, 'tasks.onSettled()')
  }

  /**
   * For the notice surface: if the task has settled and nobody has seen it, mark it
   * reported and return it; otherwise `undefined`. Check and mark in one step, so a
   * settlement is announced at most once.
   */
  takeUnreported(id: string): TaskInfo | undefined {
    const record = this.tasks.get(id)
    if (!record || record.live || record.reported) return undefined
    record.reported = true
    return record.info()
  }

  /**
   * Owned tasks that have settled and that nobody has seen, oldest first: what a notice
   * surface that (re)starts must still announce, since settlements while it was not
   * loaded reached no listener.
   */
  unreported(): TaskInfo[] {
    const infos: TaskInfo[] = []
    for (const record of this.tasks.values()) if (record.owner !== undefined && !record.live && !record.reported) infos.push(record.info())
    return infos
  }

  private readRecord(record: TaskRecord): TaskRead {
    const read = record.read()
    if (!record.live && !record.reported) {
      record.reported = true
      read.task.reported = true
    }
    return read
  }

  private access(id: string, caller: string): TaskRecord {
    const record = this.tasks.get(id)
    if (!record) {
      const own = this.list(caller).map((task) => task.id)
      throw new TaskError('UNKNOWN_TASK', `no task "${id}" (${own.length ? `yours: ${own.join(', ')}` : 'you have none'})`)
    }
    if (!this.visible(record, caller)) {
      throw new TaskError('NOT_OWNER', `task ${id} belongs to another session: an agent can only read, wait on or kill its own tasks (task_list shows yours)`)
    }
    return record
  }

  private visible(record: TaskRecord, caller: string): boolean {
    return record.owner === undefined || record.owner === caller
  }

  /** The owner's live tasks; those still queued only with `withQueued` (see `TaskRegistration.queued`). */
  private liveCount(owner: string | undefined, withQueued = false): number {
    let count = 0
    // A queued task has not started: its queue bounds it, not the live-task limit.
    for (const record of this.tasks.values()) if (record.owner === owner && record.live && (withQueued || !record.queued)) count++
    return count
  }

  private announce(record: TaskRecord): void {
    const info = record.info()
    this.notices.taskSettled(info)
    const report = (error: unknown) => this.home.logger('tasks').warn('a task settlement listener failed (ignored): %s', errorMessage(error))
    for (const listener of this.listeners) {
      try {
        // Typed to return nothing, but an async listener returns a promise: its rejection is
        // contained like a throw, never left to take the host down as an unhandled rejection.
        const returned: unknown = listener(info)
        if (returned instanceof Promise) returned.catch(report)
      } catch (error) {
        // Listeners observe; one that throws must not keep the others or the waiters from hearing.
        report(error)
      }
    }
    if (record.owner === undefined) return
    const waiters = this.ownerWaiters.get(record.owner)
    if (!waiters) return
    this.ownerWaiters.delete(record.owner)
    for (const resolve of waiters) resolve()
  }

  /** The agent registry's cleanup for `owner`: stop its work, then forget its tasks (nobody may read them now). */
  private async releaseOwner(owner: string): Promise<void> {
    // A work source takes its own work down with its owner (the continuable children are disposed with their parent).
    await this.killTasks(owner, `its owner ${owner} was disposed`)
    this.notices.forget(owner)
    for (const [id, record] of this.tasks) if (record.owner === owner) this.tasks.delete(id)
    const waiters = this.ownerWaiters.get(owner)
    this.ownerWaiters.delete(owner)
    for (const resolve of waiters ?? []) resolve()
  }

  private async shutdown(): Promise<void> {
    const live = [...this.tasks.values()].filter((record) => record.live)
    for (const record of live) {
      record.reported = true
      record.cancel('the tasks runtime was unloaded')
    }
    await Promise.all(live.map((record) => record.settled))
    this.tasks.clear()
    this.notices.close()
  }
}

function validate(registration: Pick<TaskRegistration, 'label' | 'cancel' | 'done'>): void {
  if (typeof registration.label !== 'string') throw new TaskError('INVALID_TASK', 'a task needs a text label')
  if (typeof registration.cancel !== 'function') throw new TaskError('INVALID_TASK', 'a task needs a cancel function')
  if (!registration.done || typeof registration.done.then !== 'function') throw new TaskError('INVALID_TASK', 'a task needs a done promise')
}

/** Resolves when `settled` does or `ms` pass; rejects when `signal` aborts first. */
function settledWithin(settled: Promise<void>, ms: number, signal: AbortSignal | undefined): Promise<void> {
  if (signal?.aborted) return Promise.reject(abortedWait(signal))
  return new Promise<void>((resolve, reject) => {
    const finish = () => {
      clearTimeout(timer)
      signal?.removeEventListener('abort', onAbort)
    }
    const onAbort = () => {
      finish()
      reject(abortedWait(signal!))
    }
    const timer = setTimeout(() => {
      finish()
      resolve()
    }, ms)
    signal?.addEventListener('abort', onAbort, { once: true })
    void settled.then(() => {
      finish()
      resolve()
    })
  })
}

function abortedWait(signal: AbortSignal): TaskError {
  return new TaskError('ABORTED', 'the wait was aborted', { cause: signal.reason })
}

export namespace TaskService {
  export interface Config {
    maxLiveTasksPerOwner: number
    maxConsecutiveWakeups: number
  }
}
