import type { BashExit, BashResult } from '@dsh/bash'
import type { TaskOutcome } from '@dsh/tasks'
import type { ToolOutput } from '@dsh/tools'

const LEFTOVERS_NOTE = 'processes it left running were stopped (use run_in_background for long-running work)'

/** One line on how a command ended, and whether that counts as a failure. */
export function describeExit(exit: BashExit, timeoutMs: number | undefined): { line: string; ok: boolean } {
  if (exit.error !== undefined) return { line: `the command could not be started: ${exit.error}`, ok: false }
  if (exit.timedOut) return { line: `timed out after ${timeoutMs}ms; the command and everything it started were stopped`, ok: false }
  if (exit.stopped) return { line: 'stopped before it finished; the command and everything it started were stopped', ok: false }
  if (exit.exitCode !== null) return { line: `exit code ${exit.exitCode}`, ok: exit.exitCode === 0 }
  return { line: `ended by ${exit.signal ?? 'an unknown cause'}`, ok: false }
}

/** The foreground result: how it ended, then its (bounded) output. */
export function renderForeground(result: BashResult, timeoutMs: number): ToolOutput {
  const { line, ok } = describeExit(result, timeoutMs)
  const lines = [line]
  if (result.leftovers) lines.push(`note: ${LEFTOVERS_NOTE}`)
  // A refused sandbox ran nothing: its output is bubblewrap's complaint, already quoted above.
  if (!result.refusedBySandbox) lines.push(result.output || '(no output)')
  const content = lines.join('\n')
  return ok ? content : { isError: true, content }
}

/** A background command's settlement: its output is the stream, so only the status travels here. */
export function backgroundOutcome(exit: BashExit, timeoutMs: number | undefined): TaskOutcome {
  const { line, ok } = describeExit(exit, timeoutMs)
  const detail = exit.leftovers ? `${line}; ${LEFTOVERS_NOTE}` : line
  if (ok) return { status: 'completed', detail }
  if (exit.stopped && !exit.timedOut) return { status: 'killed', detail }
  return { status: 'failed', detail }
}
