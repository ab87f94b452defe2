/**
 * What a parent hears of an A2A task while it works, from the task's stream:
 *
 * | stream event                                   | progress |
 * |------------------------------------------------|----------|
 * | status update with `metadata.dsh.progress` (a dsh worker) | those updates, as sent (`tool-start`, `tool-end`, `usage`) |
 * | other status update with a message             | `status`: the message's text |
 * | artifact update that appends, or starts an artifact | `text`: the text it adds |
 * | final status with `metadata.dsh.usage`         | the run's `usage` (`usageIn`) |
 *
 * `metadata.dsh.descendants` (each start and end of an agent below the task) is not progress
 * either: `descendantsIn` reads it whether or not anybody listens to progress, for the
 * parent's hooks. Keep-alives (`metadata.dsh.keepAlive`) are not progress. The worker is untrusted:
 * `metadata.dsh.progress` that is not a list is dropped and logged here, and each entry is
 * checked by the progress sink, which drops and logs what does not fit.
 */
import type { Message, Part } from '@a2a-js/sdk'
import { isRecord } from '@dsh/base'
import { readReportedDescendant, type ProgressReporter, type ReportedDescendant, type SubagentProgress, type SubagentUsage } from '@dsh/subagent'


export class A2aProgressReader {
  constructor(
    private readonly target: ProgressReporter,
    private readonly dropped: (reason: string) => void,
  ) {}

  status(message: Message | undefined, metadata: unknown): void {
    if (!this.target.reporting) return
    const dsh = dshOf(metadata)
    if (dsh?.keepAlive === true) return
    if (dsh?.progress !== undefined) {
      if (!Array.isArray(dsh.progress)) return this.dropped('a status update whose metadata.dsh.progress is not a list')
      // Structured progress says what the message says, better: the message is not repeated.
      for (const update of dsh.progress) this.target.report(update as SubagentProgress)
      return
    }
    const text = message ? textOfParts(message.parts) : ''
    if (text) this.target.report({ kind: 'status', text })
  }

  /**
   * Text an artifact update adds is streamed text: an append, or a new artifact's first
   * chunk. A chunk that replaces what an artifact had (a dsh worker's last `answer` chunk
   * restating the answer) adds nothing new and is not repeated.
   */
  artifact(added: string, replacedExisting: boolean): void {
    if (!this.target.reporting || replacedExisting || !added) return
    this.target.report({ kind: 'text', text: added })
  }

  /** Each well-formed report in a status update's `metadata.dsh.descendants`, told in order (one of the wrong shape is dropped and logged). */
  descendantsIn(metadata: unknown, tell: (reported: ReportedDescendant) => void): void {
    const descendants = dshOf(metadata)?.descendants
    if (descendants === undefined) return
    if (!Array.isArray(descendants)) return this.dropped('a status update whose metadata.dsh.descendants is not a list')
    for (const entry of descendants) {
      const reported = readReportedDescendant(entry, 'metadata.dsh.descendants entry', this.dropped)
      if (reported !== undefined) tell(reported)
    }
  }

  /** The usage a status update's `metadata.dsh.usage` reports, when well-formed (else dropped and logged). */
  usageIn(metadata: unknown): SubagentUsage | undefined {
    const usage = dshOf(metadata)?.usage
    if (usage === undefined) return undefined
    if (isRecord(usage) && isCount(usage.inputTokens) && isCount(usage.outputTokens) && isCount(usage.cachedInputTokens)) {
      return { inputTokens: usage.inputTokens, outputTokens: usage.outputTokens, cachedInputTokens: usage.cachedInputTokens }
    }
    this.dropped(`a status update whose metadata.dsh.usage is not { inputTokens, outputTokens, cachedInputTokens } in whole tokens`)
    return undefined
  }
}

function dshOf(metadata: unknown): Record<string, unknown> | undefined {
  const dsh = isRecord(metadata) ? metadata.dsh : undefined
  return isRecord(dsh) ? dsh : undefined
}

function textOfParts(parts: readonly Part[]): string {
  return parts.map((part) => (part.content?.$case === 'text' ? part.content.value : '')).join('')
}

function isCount(value: unknown): value is number {
  return typeof value === 'number' && Number.isSafeInteger(value) && value >= 0
}
