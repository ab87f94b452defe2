/** How the control tools render their answers to the model. */
import type { ContinuableChildInfo } from '@dsh/subagent'

/** One line per child: `<id> [running|idle] — <label>`, with ` parent=<id> depth=<n>` for descendants. */
export function renderAgents(children: readonly ContinuableChildInfo[], withLineage: boolean): string {
  if (children.length === 0) return '(no subagents)'
  return children
    .map((child) => {
      const line = `${child.childId} [${child.state}] — ${child.label} (${child.provider}, ${child.turns} ${child.turns === 1 ? 'turn' : 'turns'})`
      return withLineage ? `${line} parent=${child.parentId} depth=${child.depth}` : line
    })
    .join('\n')
}
