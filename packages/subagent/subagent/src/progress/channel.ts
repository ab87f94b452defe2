/**
 * One run's progress channel: it takes a child's updates as fast as the transport produces
 * them and hands them on at most once per interval, in order, in bounded memory.
 *
 * Coalescing: adjacent text merges into one update; a newer `usage` or `status` replaces
 * the pending one. Bounds: at most `MAX_PENDING` updates and `MAX_TEXT` characters of text
 * wait between two emissions; beyond them the oldest are dropped and counted in the next
 * event's `dropped`. So a child streaming ten thousand deltas a second costs a string
 * append per delta and a handful of events a second, however long it runs.
 *
 * Before the run is published (`bind`) updates wait; `close` emits what is pending, then
 * refuses everything after it, so every progress event of a run precedes its `subagent/end`.
 */
import type { SubagentProgress, SubagentProgressInfo, SubagentRunInfo, ProgressSink } from '../types.js'
import { bounded, progressProblem } from './shape.js'

/** Most updates held between two emissions (text merges, so this counts tool calls mostly). */
export const MAX_PENDING = 64
/** Most characters of streamed text held between two emissions; the newest are kept. */
export const MAX_TEXT = 8192

export interface ProgressChannelOptions {
  /** Least time between two emissions of this run, in milliseconds. */
  intervalMs: number
  /** Hand one coalesced batch on (the service emits `subagent/progress` and calls the caller's observer). */
  emit(info: SubagentProgressInfo): void
  /** Called with a readable reason for each update dropped as malformed. */
  onMalformed(reason: string): void
}

export class ProgressChannel implements ProgressSink {
  private pending: SubagentProgress[] = []
  private droppedUpdates = 0
  private droppedText = 0
  private info: SubagentRunInfo | undefined
  private seq = 0
  private lastEmit = -Infinity
  private timer: ReturnType<typeof setTimeout> | undefined
  private closed = false

  constructor(private readonly options: ProgressChannelOptions) {}

  report(update: SubagentProgress): void {
    if (this.closed) return
    const problem = progressProblem(update)
    if (problem !== undefined) {
      this.options.onMalformed(problem)
      return
    }
    this.enqueue(update)
    this.schedule()
  }

  /** The run is published: updates now go out under its identity. */
  bind(info: SubagentRunInfo): void {
    if (this.closed) return
    this.info = info
    this.schedule()
  }

  /** Emit what is pending (when bound) and take nothing more. Idempotent. */
  close(): void {
    if (this.closed) return
    if (this.timer !== undefined) clearTimeout(this.timer)
    this.timer = undefined
    this.flush()
    this.closed = true
    this.pending = []
  }

  private enqueue(update: SubagentProgress): void {
    const { pending } = this
    const last = pending[pending.length - 1]
    if (update.kind === 'text') {
      if (!update.text) return
      if (last?.kind === 'text') {
        last.text += update.text
        // Trim only when well past the bound, so a burst of deltas costs amortised appends.
        if (last.text.length > 2 * MAX_TEXT) this.trimText(last)
        return
      }
      pending.push({ kind: 'text', text: update.text })
    } else {
      if (update.kind === 'usage' || update.kind === 'status') {
        const index = pending.findIndex((held) => held.kind === update.kind)
        if (index >= 0) pending.splice(index, 1)
      }
      pending.push(bounded(update))
    }
    if (pending.length > MAX_PENDING) {
      const [oldest] = pending.splice(0, 1)
      if (oldest?.kind === 'text') this.droppedText += oldest.text.length
      else this.droppedUpdates += 1
    }
  }

  /** Keep the newest `MAX_TEXT` characters of a text update; what goes is counted. */
  private trimText(update: { text: string }): void {
    const excess = update.text.length - MAX_TEXT
    if (excess <= 0) return
    this.droppedText += excess
    update.text = update.text.slice(excess)
  }

  private schedule(): void {
    if (this.info === undefined || this.timer !== undefined || this.pending.length === 0) return
    const wait = Math.max(0, this.lastEmit + this.options.intervalMs - performance.now())
    this.timer = setTimeout(() => {
      this.timer = undefined
      this.flush()
    }, wait)
    // Progress never keeps a process alive: `close` emits whatever is left.
    this.timer.unref?.()
  }

  private flush(): void {
    const { info } = this
    if (info === undefined || this.pending.length === 0) return
    for (const update of this.pending) if (update.kind === 'text') this.trimText(update)
    const batch: SubagentProgressInfo = { ...info, seq: ++this.seq, updates: this.pending }
    if (this.droppedUpdates > 0 || this.droppedText > 0) batch.dropped = { updates: this.droppedUpdates, textChars: this.droppedText }
    this.pending = []
    this.droppedUpdates = 0
    this.droppedText = 0
    this.lastEmit = performance.now()
    this.options.emit(batch)
  }
}
