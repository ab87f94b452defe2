import type { SubagentUsage } from '@dsh/subagent'
import { truncateColumns } from '@dsh/subagent'
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

/** A token count in a few characters: `950`, `12.3k`, `1.2M`. */
export function tokens(count: number): string {
  if (count < 1000) return String(count)
  if (count < 1_000_000) return `${(count / 1000).toFixed(count < 10_000 ? 1 : 0)}k`
  return `${(count / 1_000_000).toFixed(1)}M`
}

/** `1.2k in 340 out`, or nothing before the first usage arrives. */
export function usageText(usage: SubagentUsage | undefined): string {
  return usage ? `${tokens(usage.inputTokens)} in ${tokens(usage.outputTokens)} out` : ''
}

/**
 * One tree line per agent: branch, mark, provider, label, state, elapsed time, tokens so
 * far, and what a running agent is doing now (the activity column) or why a failed one
 * failed. Cut to `width`.
 */
export function treeLines(tracker: ProgressTracker, now: number, width = 100): string[] {
  return tracker.walk().map(({ node, depth, last }) => {
    const branch = depth === 0 ? '' : last.slice(1, -1).map((isLast) => (isLast ? '   ' : '│  ')).join('') + (last.at(-1) ? '└─ ' : '├─ ')
    const name = node.provider === 'root' ? 'dsh' : node.queued ? byWhom(node) : `${byWhom(node)} ${shortId(node.id)}`
    const label = node.label ? ` "${node.label}"` : ''
    const used = usageText(node.usage)
    const activity = node.state === 'running' && node.waiting !== undefined ? `waiting for approval: ${node.waiting}` : node.state === 'running' && !node.idle ? node.activity : node.state === 'failed' && node.stopReason ? `(${node.stopReason})` : undefined
    // A continuable child between turns is idle, whatever its last turn's outcome; a queued delegation has no child yet.
    const shown = node.idle ? `idle after ${node.stopReason ?? 'its turn'}` : node.queued ? 'queued' : node.state
    const line = `${branch}${node.idle ? '◦' : MARK[node.state]} ${name}${label}  ${shown} ${seconds(elapsed(node, now))}${used ? `  ${used}` : ''}${activity ? `  ${activity}` : ''}`
    return truncateColumns(line, width)
  })
}

/** Who a plain line is about: `spawn <id> "label"`, then `[helper reviewer]` for a helper (the leading words stay as scripts parse them). */
function who(node: ProgressNode): string {
  return `${node.provider} ${node.id}${node.label ? ` "${node.label}"` : ''}${node.helper !== undefined ? ` [helper ${node.helper}]` : ''}`
}

/** The provider, or the helper and its provider (`reviewer (spawn)`), as `dsh sessions tree` names them. */
function byWhom(node: ProgressNode): string {
  return node.helper !== undefined ? `${node.helper} (${node.provider})` : node.provider
}

/**
 * The plain line for one change when stdout is not a terminal: a child's start and end,
 * and one line per tool call it begins (never one per text delta); nothing for the root.
 */
export function lifecycleLine(change: ProgressChange, now: number): string | undefined {
  const { node } = change
  if (change.kind === 'budget') return `[budget] ${change.text}`
  if (change.kind === 'queued') return `[subagent] queued ${node.provider}${node.label ? ` "${node.label}"` : ''}${node.helper !== undefined ? ` [helper ${node.helper}]` : ''} (parent ${node.parentId}): its tree is at its cap`
  if (change.kind === 'step' || node.provider === 'root') return undefined
  if (change.kind === 'tool') return `[subagent] tool ${who(node)} ${change.name}${change.args ? ` ${change.args}` : ''}`
  if (change.kind === 'start') return `[subagent] start ${who(node)} (parent ${node.parentId})`
  const why = node.diagnostic && node.state !== 'done' ? `: ${node.diagnostic}` : ''
  const idle = node.idle ? ', idle' : ''
  // Unchanged since before progress existed: scripts parse it (usage is in --json's end record).
  return `[subagent] end ${node.provider} ${node.id} ${node.stopReason} after ${seconds(elapsed(node, now))}${why}${idle}`
}

/**
 * Redraws the tree in place on a terminal: moves the cursor back over the lines it drew
 * last time and clears below. Redraws at most every `intervalMs`, and at once on start/end.
 */
export class TtyTreeRenderer {
  private drawn = 0
  /** Prompts standing the tree aside; it is not drawn while any is up. */
  private asides = 0
  private readonly timer: NodeJS.Timeout

  constructor(private readonly tracker: ProgressTracker, private readonly out: NodeJS.WriteStream, intervalMs = 100) {
    tracker.onChange((change) => {
      // Activity redraws with the next tick; a run starting or ending is drawn at once; a budget note stands above the tree.
      if (change.kind === 'budget') this.note(`dsh: ${change.text}`)
      else if (change.kind === 'start' || change.kind === 'end' || change.kind === 'queued') this.draw()
    })
    this.timer = setInterval(() => {
      // elapsed times tick even when nothing else changed
      this.draw()
    }, intervalMs)
    this.timer.unref()
  }

  draw(): void {
    if (this.asides > 0) return
    const lines = treeLines(this.tracker, Date.now(), Math.max(40, (this.out.columns ?? 100) - 1))
    this.out.write(this.erase() + lines.map((line) => `${line}\n`).join(''))
    this.drawn = lines.length
  }

  /**
   * Write `text` (whole lines) above the tree: the tree is erased first and drawn again
   * below it, so the lines the next redraw moves back over are the tree's alone.
   */
  note(text: string): void {
    this.out.write(this.erase() + (text.endsWith('\n') ? text : `${text}\n`))
    this.drawn = 0
    this.draw()
  }

  /** Erase the tree and stop redrawing it (a prompt is on screen); the returned function draws it again. */
  standAside(): () => void {
    this.out.write(this.erase())
    this.drawn = 0
    this.asides++
    let back = false
    return () => {
      if (back) return
      back = true
      this.asides--
      this.draw()
    }
  }

  stop(): void {
    clearInterval(this.timer)
    this.asides = 0
    this.draw()
  }

  /** The escape sequence that takes the cursor back over the last frame and clears below. */
  private erase(): string {
    return this.drawn > 0 ? `\x1b[${this.drawn}F\x1b[J` : ''
  }
}
