import { errorMessage } from '@dsh/base'
import type { ToolOutput } from '@dsh/tools'
import { outputText } from '@dsh/llm'
import type { SubagentResult, SubagentRun } from '@dsh/subagent'

/**
 * Collect a run synchronously: await its result and always dispose it, whatever
 * happens. A result failure and a disposal failure are both reported.
 */
export async function collect(run: SubagentRun): Promise<ToolOutput> {
  let result: SubagentResult | undefined
  let resultError: unknown
  let disposeError: unknown
  try {
    result = await run.result
  } catch (error) {
    resultError = error
  } finally {
    disposeError = await run.dispose().then(
      () => undefined,
      (error: unknown) => error ?? new Error('dispose failed'),
    )
  }
  const problems: string[] = []
  if (resultError !== undefined) problems.push(`the subagent run failed: ${errorMessage(resultError)}`)
  if (disposeError !== undefined) problems.push(`releasing the subagent failed: ${errorMessage(disposeError)}`)
  if (!result) return { isError: true, content: problems.join('\n') }
  const rendered = renderResult(result)
  if (problems.length === 0) return rendered
  return { isError: true, content: `${typeof rendered.content === 'string' ? rendered.content : ''}\n${problems.join('\n')}` }
}

/** `completed` is the answer; any other reason is an error naming it, with the diagnostic and partial output. */
export function renderResult(result: SubagentResult): Exclude<ToolOutput, string> & { content: string } {
  const text = outputText(result.output)
  if (result.stopReason === 'completed') {
    const answer = result.structured !== undefined ? JSON.stringify(result.structured) : text
    return { content: answer || '(the subagent finished without any output)' }
  }
  const lines = [`the subagent ended ${result.stopReason}${result.diagnostic ? `: ${result.diagnostic}` : ''}`]
  if (text) lines.push(`partial output:\n${text}`)
  return { isError: true, content: lines.join('\n') }
}
