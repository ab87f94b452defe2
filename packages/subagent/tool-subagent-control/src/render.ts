/** How the control tools render their answers to the model. */
import type { ContinuableChildInfo } from '@dsh/subagent'

/**
 * One line per child: `<id> [running|idle] — <label>`, with ` parent=<id> depth=<n>` for
 * descendants, and what a running child waits on (`waiting`: an approval) when it waits.
 */
export function renderAgents(children: readonly ContinuableChildInfo[], withLineage: boolean, waiting: (childId: string) => string | undefined = () => undefined): string {
  if (children.length === 0) return '(no subagents)'
  return children
    .map((child) => {
      const waits = child.state === 'running' ? waiting(child.childId) : undefined
      const line = `${child.childId} [${child.state}${waits !== undefined ? `, waiting for ${waits}` : ''}] — ${child.label} (${child.provider}, ${child.turns} ${child.turns === 1 ? 'turn' : 'turns'})`
      return withLineage ? `${line} parent=${child.parentId} depth=${child.depth}` : line
    })
    .join('\n')
}
