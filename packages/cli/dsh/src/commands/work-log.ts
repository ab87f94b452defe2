/**
 * The line `dsh worker` and `dsh a2a serve` write to stderr as each job or task starts and
 * ends, so an operator sees what a long-lived worker is doing: its id, the helper and the
 * delegation's label it came with, and at its end the outcome, how long it took and the
 * tokens it used. What a caller wrote (a label, a helper's name, a failure's reason) is made
 * printable and cut short, so one line stays one line.
 */
import { printable } from '@dsh/base'

export interface WorkAbout {
  /** `job 7f3…` or `task 1c2…`. */
  what: string
  /** `queue dsh, attempt 1`, `context 9a…`. */
  where: string
  helper?: string
  label?: string
}

export interface WorkUsage {
  inputTokens: number
  outputTokens: number
  cachedInputTokens?: number
  cacheHitInputTokens?: number
}

export function workStartLine(verb: string, about: WorkAbout): string {
  return `${verb}: ${about.what} started (${described(about)})\n`
}

export function workEndLine(verb: string, about: WorkAbout, end: { outcome: string; detail?: string; durationMs: number; usage?: WorkUsage }): string {
  const detail = end.detail === undefined || end.outcome === 'completed' ? '' : `: ${cut(end.detail, 200)}`
  return `${verb}: ${about.what} ${cut(end.outcome, 40)}${detail} after ${duration(end.durationMs)} (${described(about)}; ${usageWords(end.usage)})\n`
}

function described(about: WorkAbout): string {
  return [about.where, about.helper !== undefined ? `helper "${cut(about.helper, 80)}"` : undefined, about.label !== undefined ? `"${cut(about.label, 80)}"` : undefined].filter((part) => part !== undefined).join('; ')
}

function usageWords(usage: WorkUsage | undefined): string {
  if (usage === undefined) return 'no usage reported'
  const cached = usage.cachedInputTokens ?? usage.cacheHitInputTokens ?? 0
  return `${usage.inputTokens} tokens in${cached > 0 ? ` (${cached} cached)` : ''}, ${usage.outputTokens} out`
}

function duration(ms: number): string {
  return ms < 1_000 ? `${Math.max(0, Math.round(ms))} ms` : `${(ms / 1_000).toFixed(1)} s`
}

/** One line of at most `max` characters, nothing a terminal would act on. */
function cut(text: string, max: number): string {
  const line = printable(text.replace(/\s*\n\s*/g, ' '))
  return line.length > max ? `${line.slice(0, max - 1)}…` : line
}
