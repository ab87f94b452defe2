import { assertNever } from '@dsh/base'
import type { SubagentProgress, SubagentProgressInfo } from '@dsh/subagent'
import type { StreamSlice, TaskOutcome } from '@dsh/tasks'

/** The most characters of a background child's activity kept for `task_output` between reads. */
export const MAX_ACTIVITY_CHARS = 16_000

/**
 * What a background subagent task hands `task_output`: while the child runs, what it has
 * done since the previous read (its text as it streamed, one line per tool it called, a
 * line per failed tool and per status); once the task has settled, its answer.
 *
 * The activity is a stream addressed by absolute character positions, fed from the run's
 * coalesced progress (`request.onProgress`), so its cost is one append per progress event,
 * never per delta. At most `MAX_ACTIVITY_CHARS` wait unread: the oldest go first, and the
 * next read starts with a line saying how many were dropped.
 *
 * At settlement the answer supersedes whatever activity was not read yet (the child's last
 * text *is* its answer, so handing both would say it twice). The cursor then stops in
 * front of the answer, so every read of a settled task returns the answer again, as a
 * final-output task would.
 */
export class BackgroundActivity {
  /** The unread-or-retained tail of the stream: positions `start` to `start + retained.length`. */
  private retained = ''
  private start = 0
  private atLineStart = true
  private settled: { answer: string; at: number } | undefined

  constructor(private readonly maxChars = MAX_ACTIVITY_CHARS) {}

  /** One coalesced progress event of the run (ignored once the task has settled). */
  record(info: SubagentProgressInfo): void {
    if (this.settled) return
    if (info.dropped) this.line(`[… the child outran its progress: ${info.dropped.updates} updates and ${info.dropped.textChars} characters of text not shown]`)
    for (const update of info.updates) this.add(update)
    const excess = this.retained.length - this.maxChars
    if (excess > 0) {
      this.retained = this.retained.slice(excess)
      this.start += excess
    }
  }

  /** The task's outcome is known: from now on reads return its output. */
  settle(outcome: TaskOutcome): void {
    this.settled ??= { answer: outcome.output ?? '', at: this.start + this.retained.length }
    this.retained = ''
  }

  read(cursor: number): StreamSlice {
    if (this.settled) return { text: this.settled.answer, next: this.settled.at, skipped: 0 }
    const end = this.start + this.retained.length
    if (cursor >= this.start) return { text: this.retained.slice(cursor - this.start), next: end, skipped: 0 }
    const skipped = this.start - cursor
    return { text: `[… ${skipped} characters of earlier activity were dropped before this read]\n${this.retained}`, next: end, skipped }
  }

  private add(update: SubagentProgress): void {
    switch (update.kind) {
      case 'text':
        this.retained += update.text
        if (update.text) this.atLineStart = update.text.endsWith('\n')
        return
      case 'tool-start':
        this.line(`→ ${update.name}${update.args ? ` ${update.args}` : ''}`)
        return
      case 'tool-end':
        // A successful call was already listed when it started; only a failure adds a line.
        if (!update.ok) this.line(`✗ ${update.name} failed${update.detail ? `: ${update.detail}` : ''}`)
        return
      case 'status':
        this.line(`[status] ${update.text}`)
        return
      case 'usage':
        // Token counts are for people watching; the parent's model reads what the child did.
        return
      default:
        return assertNever(update, 'subagent progress')
    }
  }

  /** A line of its own, after any text that had not ended one. */
  private line(text: string): void {
    this.retained += `${this.atLineStart ? '' : '\n'}${text}\n`
    this.atLineStart = true
  }
}
