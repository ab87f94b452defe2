/**
 * The server's task store: the SDK's in-memory semantics (copies in and out, scoped by
 * tenant and user, `ListTasks` filtering and paging), but bounded: a task that reached a
 * final state is dropped `FINISHED_TASK_TTL_MS` after it finished, and at most
 * `MAX_FINISHED_TASKS` finished tasks are kept (oldest dropped first). Tasks still
 * waiting or working are never dropped. A dropped task's id is unknown afterwards
 * (`GetTask` answers "task not found"); its session stays on disk.
 *
 * The SDK's result manager loads and saves the whole task once per event (each streamed
 * chunk included) through this interface, and other callers (`GetTask` with a history
 * length) change the task they load, so copies on load and save are kept: sharing the
 * stored object would let a reader corrupt it.
 */
import { TaskState, type ListTasksRequest, type ListTasksResponse, type Task } from '@a2a-js/sdk'
import { resolveUserScope, type ServerCallContext, type TaskStore } from '@a2a-js/sdk/server'
import { RequestMalformedError } from '@a2a-js/sdk/errors'

/** How long a finished task stays readable (`GetTask`, `ListTasks`). */
const FINISHED_TASK_TTL_MS = 10 * 60_000
/** How many finished tasks are kept at most. */
const MAX_FINISHED_TASKS = 1000

const FINAL_STATES: ReadonlySet<TaskState> = new Set([TaskState.TASK_STATE_COMPLETED, TaskState.TASK_STATE_FAILED, TaskState.TASK_STATE_CANCELED, TaskState.TASK_STATE_REJECTED])
const DEFAULT_PAGE_SIZE = 50

interface Stored {
  task: Task
  /** When it was first saved in a final state. */
  finishedAt: number | undefined
}

export class BoundedTaskStore implements TaskStore {
  /** By scope (tenant and user), then by task id, in insertion order. */
  private readonly scopes = new Map<string, Map<string, Stored>>()
  /** Finished tasks, oldest first: [scope, task id]. */
  private readonly finished: Array<[string, string]> = []

  constructor(
    private readonly limits: { ttlMs: number; maxFinished: number } = { ttlMs: FINISHED_TASK_TTL_MS, maxFinished: MAX_FINISHED_TASKS },
    private readonly now: () => number = Date.now,
    /** Told of each task dropped, so what is kept beside it (its push configs) goes too. */
    private readonly dropped: (taskId: string) => void = () => {},
  ) {}

  /** Tasks held now, finished or not (for tests and diagnostics). */
  get size(): number {
    let count = 0
    for (const tasks of this.scopes.values()) count += tasks.size
    return count
  }

  async load(taskId: string, context: ServerCallContext): Promise<Task | undefined> {
    this.evict()
    const stored = this.scopes.get(scopeOf(context))?.get(taskId)
    return stored ? structuredClone(stored.task) : undefined
  }

  async save(task: Task, context: ServerCallContext): Promise<void> {
    const scope = scopeOf(context)
    let tasks = this.scopes.get(scope)
    if (!tasks) this.scopes.set(scope, (tasks = new Map()))
    const before = tasks.get(task.id)
    const final = task.status !== undefined && FINAL_STATES.has(task.status.state)
    const finishedAt = before?.finishedAt ?? (final ? this.now() : undefined)
    if (finishedAt !== undefined && before?.finishedAt === undefined) this.finished.push([scope, task.id])
    tasks.set(task.id, { task: structuredClone(task), finishedAt })
    this.evict()
  }

  async list(params: ListTasksRequest, context: ServerCallContext): Promise<ListTasksResponse> {
    this.evict()
    const pageSize = params.pageSize ?? DEFAULT_PAGE_SIZE
    let tasks = [...(this.scopes.get(scopeOf(context))?.values() ?? [])].map((stored) => stored.task)
    if (params.contextId) tasks = tasks.filter((task) => task.contextId === params.contextId)
    if (params.status !== undefined && params.status !== TaskState.TASK_STATE_UNSPECIFIED) tasks = tasks.filter((task) => task.status?.state === params.status)
    if (params.statusTimestampAfter) {
      const after = Date.parse(params.statusTimestampAfter)
      tasks = tasks.filter((task) => task.status?.timestamp !== undefined && Date.parse(task.status.timestamp) >= after)
    }
    // Newest status first, then by id, as the SDK's own store orders them.
    tasks.sort((a, b) => (b.status?.timestamp ?? '').localeCompare(a.status?.timestamp ?? '') || b.id.localeCompare(a.id))
    const totalSize = tasks.length
    if (params.pageToken) {
      const cursor = pageCursor(params.pageToken)
      const at = tasks.findIndex((task) => (task.status?.timestamp ?? '') === cursor.timestamp && task.id === cursor.id)
      tasks = at === -1 ? [] : tasks.slice(at + 1)
    }
    const page = tasks.slice(0, pageSize)
    const last = page.at(-1)
    return {
      tasks: page.map((task) => {
        const copy = structuredClone(task)
        if (!params.includeArtifacts) copy.artifacts = []
        return copy
      }),
      nextPageToken: last && tasks.length > page.length ? Buffer.from(`${last.status?.timestamp ?? ''}|${last.id}`).toString('base64') : '',
      pageSize,
      totalSize,
    }
  }

  /** Drop finished tasks past their time, then the oldest beyond the count. */
  private evict(): void {
    const expired = this.now() - this.limits.ttlMs
    while (this.finished.length > 0) {
      const [scope, id] = this.finished[0]!
      const stored = this.scopes.get(scope)?.get(id)
      const tooMany = this.finished.length > this.limits.maxFinished
      if (stored && stored.finishedAt !== undefined && stored.finishedAt > expired && !tooMany) break
      this.finished.shift()
      if (this.scopes.get(scope)?.delete(id)) this.dropped(id)
      if (this.scopes.get(scope)?.size === 0) this.scopes.delete(scope)
    }
  }
}

function scopeOf(context: ServerCallContext): string {
  return `${context.tenant ?? ''}\u0000${resolveUserScope(context)}`
}

function pageCursor(token: string): { timestamp: string; id: string } {
  const [timestamp = '', ...id] = Buffer.from(token, 'base64').toString('utf8').split('|')
  if (id.length === 0) throw new RequestMalformedError('the page token is not one this server gave out; start again without pageToken')
  return { timestamp, id: id.join('|') }
}
