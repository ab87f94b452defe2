/**
 * What a hook's run means, in Claude Code's terms: exit 0 is success (its standard output
 * may be a JSON decision), exit 2 blocks with standard error as the reason, any other exit
 * is a non-blocking error. A hook that timed out, crashed or printed output that is not a
 * valid decision is a note and no decision: it never allows anything.
 */
import type { HookRun } from './runner.js'

export type HookDecision = 'block' | 'ask' | 'allow'

export interface HookOutcome {
  /** `undefined`: no opinion. */
  decision?: HookDecision
  /** What the model is told for a block (and the asker for an ask). */
  reason?: string
  /** One line about something wrong with the run, for the log. */
  note?: string
  /** Text for the model's context (`hookSpecificOutput.additionalContext`; plain output of `UserPromptSubmit` and `SessionStart`). */
  context?: string
  /** `continue: false`: the agent's turn stops, saying why (`stopReason`). */
  stop?: string
}

const PERMISSION_DECISIONS: Readonly<Record<string, HookDecision>> = { deny: 'block', ask: 'ask', allow: 'allow' }
const MAX_REASON_CHARS = 4_000

/**
 * `plainIsContext`: the event's plain standard output (not JSON) is context for the model,
 * as Claude Code reads it for `UserPromptSubmit` and `SessionStart`.
 */
export function outcomeOf(run: HookRun, hook: string, plainIsContext = false): HookOutcome {
  const truncated = run.truncated ? ' (its output was cut)' : ''
  if (run.failed !== undefined) return { note: `hook "${hook}" could not start: ${run.failed}` }
  if (run.timedOut) return { note: `hook "${hook}" was stopped at its timeout; no decision` }
  if (run.exitCode === undefined) return { note: `hook "${hook}" was killed by a signal; no decision` }
  if (run.exitCode === 2) return { decision: 'block', reason: cut(run.stderr.trim() || `blocked by hook "${hook}"`) }
  if (run.exitCode !== 0) return { note: `hook "${hook}" exited ${run.exitCode}${run.stderr.trim() ? `: ${firstLine(run.stderr)}` : ''}; no decision` }
  const text = run.stdout.trim()
  if (!text.startsWith('{')) return plainIsContext && text !== '' ? { context: cut(text) } : {}
  let parsed: unknown
  try {
    parsed = JSON.parse(text)
  } catch {
    return { note: `hook "${hook}" printed output that is not valid JSON${truncated}; no decision` }
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) return { note: `hook "${hook}" printed JSON that is not an object; no decision` }
  const output = parsed as Record<string, unknown>
  const decided = decisionOf(output, hook)
  const specific = output.hookSpecificOutput
  const context = typeof specific === 'object' && specific !== null ? (specific as Record<string, unknown>).additionalContext : undefined
  return {
    ...decided,
    ...(typeof context === 'string' && context.trim() !== '' && { context: cut(context.trim()) }),
    ...(output.continue === false && { stop: typeof output.stopReason === 'string' && output.stopReason.trim() !== '' ? cut(output.stopReason.trim()) : `hook "${hook}" stopped the agent` }),
  }
}

/** Claude Code's two JSON shapes: `hookSpecificOutput.permissionDecision` (newer) and `decision` (older). */
function decisionOf(output: Record<string, unknown>, hook: string): HookOutcome {
  const specific = output.hookSpecificOutput
  if (specific !== undefined) {
    if (typeof specific !== 'object' || specific === null) return { note: `hook "${hook}": hookSpecificOutput must be an object; no decision` }
    const { permissionDecision, permissionDecisionReason } = specific as Record<string, unknown>
    if (permissionDecision !== undefined) {
      const decision = typeof permissionDecision === 'string' ? PERMISSION_DECISIONS[permissionDecision] : undefined
      if (decision === undefined) return { note: `hook "${hook}": permissionDecision ${JSON.stringify(permissionDecision)} is not allow, deny or ask; no decision` }
      return { decision, ...(typeof permissionDecisionReason === 'string' && { reason: cut(permissionDecisionReason) }) }
    }
  }
  const { decision, reason } = output
  if (decision === undefined) return {}
  if (decision === 'block' || decision === 'deny') return { decision: 'block', reason: typeof reason === 'string' && reason.trim() ? cut(reason) : `blocked by hook "${hook}"` }
  if (decision === 'approve' || decision === 'allow') return { decision: 'allow' }
  return { note: `hook "${hook}": decision ${JSON.stringify(decision)} is not block or approve; no decision` }
}

function firstLine(text: string): string {
  return cut(text.trim().split('\n')[0]!, 200)
}

function cut(text: string, limit = MAX_REASON_CHARS): string {
  return text.length > limit ? `${text.slice(0, limit)}…` : text
}
