/**
 * Background delegations as a parent's session records them. A background child is a
 * `ctx.tasks` task: the delegation's result is the line its parent's model read
 * (`started background subagent task subagent-3; …` or `queued background subagent task
 * subagent-3: …`, from `@dsh/tool-subagent`), its child's session names the call in its
 * header (`toolCallId`), and how the task ended is the status line the parent read later,
 * in a `task_output` / `task_kill` / `task_list` result or a completion notice
 * (`subagent-3 failed: error: budget: … · subagent: label`, from `@dsh/tool-tasks`). A child
 * that was queued and never started (its tree's budget was spent, it was killed) has no
 * session at all: these lines are all there is of it.
 *
 * The lines are read as those packages write them; `tests/states.test.ts` runs the real
 * tools, so a change of wording there fails here rather than silently losing the states.
 */
import { isRecord } from '@dsh/base'
import type { SessionEvent } from '@dsh/session'

export interface BackgroundDelegation {
  /** The parent's tool call that started it (a started child's header `toolCallId`). */
  callId: string
  taskId: string
  /** Whether it had to wait for a slot of its tree's cap when it was delegated. */
  queued: boolean
  /** The delegation's description, where the call gave one. */
  label?: string
  /** When the delegation's result was recorded. */
  at: number
  /** How its task ended (`failed: …`, `killed: …`), when the parent has read it. */
  settled?: string
  settledAt?: number
  /** The budget's diagnostic (`budget: …`), when a budget stopped it or kept it from starting. */
  budget?: string
}

const START = /^(started|queued) background subagent task ([a-z][\w-]*-\d+)\b/
const STATUS_LINE = /^(?:- )?([a-z][\w-]*-\d+) (completed|failed|killed)\b(.*)$/gm

/** Every background delegation in a parent's events, with how each ended where the parent read it. */
export function backgroundDelegations(events: readonly SessionEvent[]): BackgroundDelegation[] {
  const byTask = new Map<string, BackgroundDelegation>()
  const descriptions = new Map<string, string>()
  for (const event of events) {
    if (event.type === 'tool/call') {
      const description = isRecord(event.call.args) ? event.call.args.description : undefined
      if (typeof description === 'string') descriptions.set(event.call.id, description)
      continue
    }
    if (event.type !== 'tool/result' && event.type !== 'user/message') continue
    const text = textOf(event.type === 'tool/result' ? event.result.content : event.message.content)
    if (event.type === 'tool/result' && event.result.isError !== true) {
      const start = START.exec(text)
      if (start) {
        const label = descriptions.get(event.result.callId)
        byTask.set(start[2]!, { callId: event.result.callId, taskId: start[2]!, queued: start[1] === 'queued', at: event.ts, ...(label !== undefined && { label }) })
        continue
      }
    }
    if (byTask.size === 0) continue
    for (const line of text.matchAll(STATUS_LINE)) {
      const delegation = byTask.get(line[1]!)
      if (!delegation || delegation.settled !== undefined) continue
      // `failed: error: budget: … · subagent: label`: the status, without what the task is.
      const rest = line[3]!
      const what = rest.lastIndexOf(' · ')
      const status = `${line[2]}${what >= 0 ? rest.slice(0, what) : rest}`.trim()
      delegation.settled = status
      delegation.settledAt = event.ts
      const budget = budgetDiagnostic(status)
      if (budget !== undefined) delegation.budget = budget
    }
  }
  return [...byTask.values()]
}

/**
 * The budget's words in a task status (`failed: budget: …`, `failed: error: budget: …`,
 * `failed: the subagent could not be started: budget: …`) or a result's first line (`the
 * subagent ended budget: …`, `the subagent ended error: budget: …`): a run the tree limits
 * stopped ends with the stop reason `budget` (earlier: `error` with a diagnostic starting
 * `budget:`), and a start they refuse fails with an error starting `budget:`.
 */
export function budgetDiagnostic(line: string): string | undefined {
  const at = line.indexOf('budget: ')
  if (at < 0) return undefined
  const before = line.slice(0, at)
  if (at > 0 && !before.endsWith(': ') && !before.endsWith(' ended ')) return undefined
  return line.slice(at)
}

function textOf(blocks: ReadonlyArray<{ type: string; text?: string }> | string): string {
  if (typeof blocks === 'string') return blocks
  return blocks.map((block) => (block.type === 'text' ? (block.text ?? '') : '')).join('')
}
