import { errorMessage } from '@dsh/base'
import type { TaskInfo, TaskOutcome, TaskRead, TaskRegistration, TaskStatus } from './types.js'

/**
 * One registered task: the producer's registration plus the registry's view of it.
 *
 * A task has exactly one settlement, taken when its `done` settles, i.e. once the work
 * has really stopped, so `running` always means "work may still be going on". A kill
 * does not settle the task by itself; it records the kill first and the settlement then
 * honours it (first wins: a kill that arrives before `done` settles makes the task
 * `killed` whatever `done` says; a kill after that changes nothing).
 */
export class TaskRecord {
  readonly kind: string
  readonly label: string
  readonly owner: string | undefined
  readonly startedAt = Date.now()
  /** Resolves after the settlement is recorded and the registry's listeners have run. */
  readonly settled: Promise<void>
  reported = false
  /** `wait` calls in progress: a settlement they will return counts as reported. */
  waiters = 0
  private _status: TaskStatus = 'running'
  private endedAt: number | undefined
  private detail: string | undefined
  private finalOutput = ''
  private killReason: string | undefined
  private cursor = 0

  constructor(
    readonly id: string,
    private readonly registration: TaskRegistration,
    onSettled: (record: TaskRecord) => void,
    private readonly reportCancelError: (error: unknown) => void,
  ) {
    this.kind = registration.kind
    this.label = registration.label
    this.owner = registration.owner
    // Recording the settlement and announcing it happen in one callback: a host that sees
    // the task no longer live (`hasLive`) must also see what its announcement queued.
    this.settled = Promise.resolve(registration.done).then(
      (outcome) => {
        this.settle(outcome)
        onSettled(this)
      },
      (error: unknown) => {
        this.settle({ status: 'failed', detail: `the task's work failed: ${errorMessage(error)}` })
        onSettled(this)
      },
    )
  }

  get status(): TaskStatus {
    return this._status
  }

  get live(): boolean {
    return this._status === 'running'
  }

  /** Live and not started yet: waiting for a slot (the producer says so). */
  get queued(): boolean {
    return this._status === 'running' && this.registration.queued?.() === true
  }

  /** Ask the producer to stop. Only the first request reaches it; its reason is the one recorded. */
  cancel(reason: string): void {
    if (!this.live || this.killReason !== undefined) return
    this.killReason = reason
    try {
      this.registration.cancel(reason)
    } catch (error) {
      // The producer still owes a settlement of `done`; a throwing cancel is its bug, reported, not ours to hide.
      this.reportCancelError(error)
    }
  }

  /** The next read: new stream text through the cursor, or the final output once settled. */
  read(): TaskRead {
    const { readOutput } = this.registration
    if (readOutput) {
      const slice = readOutput(this.cursor)
      this.cursor = slice.next
      return { task: this.info(), text: slice.text, skipped: slice.skipped }
    }
    return { task: this.info(), text: this.live ? '' : this.finalOutput, skipped: 0 }
  }

  info(): TaskInfo {
    const info: TaskInfo = {
      id: this.id,
      kind: this.kind,
      label: this.label,
      status: this._status,
      outputMode: this.registration.readOutput ? 'stream' : 'final',
      startedAt: this.startedAt,
      reported: this.reported,
    }
    if (this.owner !== undefined) info.owner = this.owner
    if (this.queued) info.queued = true
    else if (this._status === 'running') {
      const waiting = this.registration.waiting?.()
      if (waiting !== undefined) info.waiting = waiting
    }
    if (this.endedAt !== undefined) info.endedAt = this.endedAt
    if (this.detail !== undefined) info.detail = this.detail
    return info
  }

  private settle(outcome: TaskOutcome): void {
    this.endedAt = Date.now()
    this.finalOutput = outcome.output ?? ''
    if (this.killReason !== undefined) {
      this._status = 'killed'
      this.detail = this.killReason
    } else {
      this._status = outcome.status
      if (outcome.detail !== undefined) this.detail = outcome.detail
    }
    if (this.waiters > 0) this.reported = true
  }
}
