import { errorMessage } from '@dsh/base'
import type { ToolOutput } from '@dsh/tools'
import { outputText } from '@dsh/llm'
import type { SubagentResult, SubagentRun, SubagentWorkspaceReport } from '@dsh/subagent'

/**
 * Collect a run synchronously: await its result and always dispose it, whatever
 * happens. A result failure and a disposal failure are both reported. Written as two
 * promise stages rather than an async function: each child of a fan-out passes here, and
 * every `await` costs a tick and a few objects.
 */
export function collect(run: SubagentRun, provider: string, helper?: string): Promise<ToolOutput> {
  return run.result.then(
    (result) => disposeThenRender(run, provider, result, undefined, helper),
    (resultError: unknown) => disposeThenRender(run, provider, undefined, resultError ?? new Error('the run failed'), helper),
  )
}

/** What the parent's session records of the child, beside the result the model reads. */
export interface DelegationRecord {
  childId: string
  provider: string
  local: boolean
  /** Where the child keeps its own record when it is not a session here (`SubagentRun.storedAt`). */
  storedAt?: string
  /** The agent definition the child was started from (the helper tool's `agent`). */
  helper?: string
  /** What it changed in its workspace of its own, when it had one. */
  workspace?: SubagentWorkspaceReport
}

/**
 * The result with `record.delegation`: which child answered, so `dsh sessions tree` can show
 * a child stored elsewhere (on an A2A worker, in Codex's store) on a line of its own.
 */
function withDelegationRecord(output: Exclude<ToolOutput, string>, run: SubagentRun, provider: string, helper: string | undefined, result: SubagentResult | undefined): ToolOutput {
  const delegation: DelegationRecord = { childId: run.id, provider, local: run.local }
  if (run.storedAt !== undefined) delegation.storedAt = run.storedAt
  if (helper !== undefined) delegation.helper = helper
  if (result?.workspace !== undefined) {
    delegation.workspace = result.workspace
    // What it changed, and how to bring it back: the model reads it with the answer.
    const note = workspaceNote(run.id, result.workspace)
    output.content = typeof output.content === 'string' ? `${output.content}\n\n${note}` : [...output.content, { type: 'text', text: `\n\n${note}` }]
  }
  output.record = { delegation }
  return output
}

function disposeThenRender(run: SubagentRun, provider: string, result: SubagentResult | undefined, resultError: unknown, helper: string | undefined): Promise<ToolOutput> {
  return run.dispose().then(
    () => withDelegationRecord(collected(result, resultError, undefined), run, provider, helper, result),
    (disposeError: unknown) => withDelegationRecord(collected(result, resultError, disposeError ?? new Error('dispose failed')), run, provider, helper, result),
  )
}

/**
 * What a child changed in its workspace, in words for the parent's model: the branch (or
 * copy), the diffstat and the files, and what to do with it.
 */
export function workspaceNote(childId: string, report: SubagentWorkspaceReport): string {
  const where = report.mode === 'worktree' ? `its worktree on branch ${report.branch}` : `its copy at ${report.path}`
  if (report.missing) return `workspace: ${where} was deleted by the child; nothing to bring back${report.committed ? ' beyond the commits on its branch (merge or discard them with the workspace tool)' : ''}.`
  if (!report.kept) return `workspace: the child changed nothing in ${where}; it was removed.`
  const state = [report.committed && 'committed', report.uncommitted && 'some left uncommitted (committed for it when merged)'].filter(Boolean).join('; ')
  const files = report.files.slice(0, 20).map((file) => `${file.status} ${file.path}${file.added !== undefined ? ` (+${file.added} -${file.removed ?? 0})` : ''}`)
  return [
    `workspace: ${where}: ${report.diffstat}${state ? ` (${state})` : ''}`,
    ...files.map((line) => `  ${line}`),
    ...(report.files.length > 20 ? [`  … and ${report.files.length - 20} more`] : []),
    `Your directory is unchanged until you bring this back: workspace tool with action "merge" (or "discard") and subagent_id ${childId}.`,
  ].join('\n')
}

function collected(result: SubagentResult | undefined, resultError: unknown, disposeError: unknown): Exclude<ToolOutput, string> {
  if (resultError === undefined && disposeError === undefined) return renderResult(result!)
  const problems: string[] = []
  if (resultError !== undefined) problems.push(`the subagent run failed: ${errorMessage(resultError)}`)
  if (disposeError !== undefined) problems.push(`releasing the subagent failed: ${errorMessage(disposeError)}`)
  if (!result) return { isError: true, content: problems.join('\n') }
  const rendered = renderResult(result)
  return { isError: true, content: `${typeof rendered.content === 'string' ? rendered.content : ''}\n${problems.join('\n')}` }
}

/**
 * How a run ended, in words: its stop reason with the diagnostic (`error: …`), said once
 * when the diagnostic already names it (a budget's `budget: the … budget of … is spent`).
 */
export function endingOf(result: Pick<SubagentResult, 'stopReason' | 'diagnostic'>): string {
  const { stopReason, diagnostic } = result
  if (!diagnostic) return stopReason
  return diagnostic.startsWith(`${stopReason}:`) ? diagnostic : `${stopReason}: ${diagnostic}`
}

/** `completed` is the answer; any other reason is an error naming it, with the diagnostic and partial output. */
export function renderResult(result: SubagentResult): Exclude<ToolOutput, string> & { content: string } {
  const text = outputText(result.output)
  if (result.stopReason === 'completed') {
    const answer = result.structured !== undefined ? JSON.stringify(result.structured) : text
    return { content: answer || '(the subagent finished without any output)' }
  }
  const lines = [`the subagent ended ${endingOf(result)}`]
  if (text) lines.push(`partial output:\n${text}`)
  return { isError: true, content: lines.join('\n') }
}
