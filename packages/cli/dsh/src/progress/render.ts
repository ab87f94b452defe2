import type { SubagentUsage } from '@dsh/subagent'
import { truncateColumns } from '@dsh/subagent'
import { NO_COLOR_PALETTE, type Palette, type Tone } from './colors.js'
import type { ProgressChange, ProgressNode, ProgressTracker } from './tracker.js'

const MARK: Record<ProgressNode['state'], string> = { running: '…', done: '✓', failed: '✗', cancelled: '⊘' }
const TONE: Record<ProgressNode['state'], Tone> = { running: 'running', done: 'ok', failed: 'failed', cancelled: 'cancelled' }

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
 * failed. Cut to `width` columns first, then painted (the mark and the state word in the
 * state's colour, when `palette` paints), so colour never counts against the width.
 */
export function treeLines(tracker: ProgressTracker, now: number, width = 100, palette: Palette = NO_COLOR_PALETTE): string[] {
  return tracker.walk().map(({ node, depth, last }) => {
    const branch = depth === 0 ? '' : last.slice(1, -1).map((isLast) => (isLast ? '   ' : '│  ')).join('') + (last.at(-1) ? '└─ ' : '├─ ')
    const name = node.provider === 'root' ? 'dsh' : node.queued ? byWhom(node) : `${byWhom(node)} ${shortId(node.id)}`
    const label = node.label ? ` "${node.label}"` : ''
    const used = usageText(node.usage)
    const activity = node.state === 'running' && node.waiting !== undefined ? `waiting for approval: ${node.waiting}` : node.state === 'running' && !node.idle ? node.activity : node.state === 'failed' && node.stopReason ? `(${node.stopReason})` : undefined
    // A continuable child between turns is idle, whatever its last turn's outcome; a queued delegation has no child yet.
    const shown = node.idle ? `idle after ${node.stopReason ?? 'its turn'}` : node.queued ? 'queued' : node.state
    const mark = node.idle ? '◦' : MARK[node.state]
    const head = `${branch}${mark} ${name}${label}  `
    const line = truncateColumns(`${head}${shown} ${seconds(elapsed(node, now))}${used ? `  ${used}` : ''}${activity ? `  ${activity}` : ''}`, width)
    // A line cut inside its head stays plain; the state word is painted only when the cut left it whole.
    if (!palette.enabled || !line.startsWith(head)) return line
    const tone: Tone = node.idle || node.queued ? 'dim' : TONE[node.state]
    const rest = line.slice(head.length)
    const state = rest.startsWith(shown) ? palette.paint(tone, shown) + rest.slice(shown.length) : rest
    return `${branch}${palette.paint(tone, mark)}${head.slice(branch.length + mark.length)}${state}`
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
