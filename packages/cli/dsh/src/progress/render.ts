import type { ProgressChange, ProgressNode, ProgressTracker } from './tracker.js'

const MARK: Record<ProgressNode['state'], string> = { running: '…', done: '✓', failed: '✗', cancelled: '⊘' }

export function seconds(ms: number): string {
  return `${(ms / 1000).toFixed(1)}s`
}

export function elapsed(node: ProgressNode, now: number): number {
  return (node.endedAt ?? now) - node.startedAt
}

function shortId(id: string): string {
  return id.length > 12 ? id.slice(-8) : id
}

/** One tree line per agent: branch, mark, provider, label, state, elapsed time, latest step. */
export function treeLines(tracker: ProgressTracker, now: number, width = 100): string[] {
  return tracker.walk().map(({ node, depth, last }) => {
    const branch = depth === 0 ? '' : last.slice(1, -1).map((isLast) => (isLast ? '   ' : '│  ')).join('') + (last.at(-1) ? '└─ ' : '├─ ')
    const name = node.provider === 'root' ? 'dsh' : `${node.provider} ${shortId(node.id)}`
    const label = node.label ? ` "${node.label}"` : ''
    const latest = node.latest && node.state === 'running' ? `  ${node.latest}` : node.state === 'failed' && node.stopReason ? `  (${node.stopReason})` : ''
    // A continuable child between turns is idle, whatever its last turn's outcome.
    const shown = node.idle ? `idle after ${node.stopReason ?? 'its turn'}` : node.state
    const line = `${branch}${node.idle ? '◦' : MARK[node.state]} ${name}${label}  ${shown} ${seconds(elapsed(node, now))}${latest}`
    return line.length > width ? `${line.slice(0, width - 1)}…` : line
  })
}

/** The plain line for one lifecycle change (stdout is not a terminal). */
export function lifecycleLine(change: ProgressChange, now: number): string | undefined {
  const { node } = change
  if (change.kind === 'step' || node.provider === 'root') return undefined
  const label = node.label ? ` "${node.label}"` : ''
  if (change.kind === 'start') return `[subagent] start ${node.provider} ${node.id}${label} (parent ${node.parentId})`
  const why = node.diagnostic && node.state !== 'done' ? `: ${node.diagnostic}` : ''
  const idle = node.idle ? ', idle' : ''
  return `[subagent] end ${node.provider} ${node.id} ${node.stopReason} after ${seconds(elapsed(node, now))}${why}${idle}`
}

/**
 * Redraws the tree in place on a terminal: moves the cursor back over the lines it drew
 * last time and clears below. Redraws at most every `intervalMs`, and at once on start/end.
 */
export class TtyTreeRenderer {
  private drawn = 0
  private dirty = false
  private readonly timer: NodeJS.Timeout

  constructor(private readonly tracker: ProgressTracker, private readonly out: NodeJS.WriteStream, intervalMs = 100) {
    tracker.onChange((change) => {
      this.dirty = true
      if (change.kind !== 'step') this.draw()
    })
    this.timer = setInterval(() => {
      // elapsed times tick even when nothing else changed
      this.draw()
    }, intervalMs)
    this.timer.unref()
  }

  draw(): void {
    const lines = treeLines(this.tracker, Date.now(), Math.max(40, (this.out.columns ?? 100) - 1))
    let frame = this.drawn > 0 ? `\x1b[${this.drawn}F\x1b[J` : ''
    frame += lines.map((line) => `${line}\n`).join('')
    this.out.write(frame)
    this.drawn = lines.length
    this.dirty = false
  }

  stop(): void {
    clearInterval(this.timer)
    this.draw()
  }
}
