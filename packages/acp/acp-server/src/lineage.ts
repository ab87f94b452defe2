import type { RecordingLink } from '@dsh/llm'

/** What a dsh parent says about itself in `_meta.dsh` (see @dsh/subagent-acp), once validated. */
export interface Lineage {
  parentSession?: string
  delegationDepth?: number
  provider?: string
  label?: string
  /** The parent delegation's absolute depth bound: this server applies the tighter of it and its own. */
  maxDepth?: number
}

/**
 * `_meta.dsh.recording` of `session/new`: the parent records or replays its model calls,
 * and this session must do the same with its own under the lineage given (see
 * @dsh/llm-replay). Malformed is refused, not ignored: a session its parent replays must
 * never reach a real model.
 */
export function recordingLinkOf(meta: unknown): RecordingLink | undefined {
  const dsh = typeof meta === 'object' && meta !== null ? (meta as Record<string, unknown>).dsh : undefined
  const recording = typeof dsh === 'object' && dsh !== null ? (dsh as Record<string, unknown>).recording : undefined
  if (recording === undefined) return undefined
  const { mode, dir, lineage } = (typeof recording === 'object' && recording !== null ? recording : {}) as Record<string, unknown>
  if ((mode !== 'record' && mode !== 'replay') || typeof dir !== 'string' || !dir.startsWith('/') || typeof lineage !== 'string' || !/^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$/.test(lineage)) {
    throw new TypeError('_meta.dsh.recording must be { mode: "record" | "replay", dir: an absolute path, lineage: a lineage key }')
  }
  return { mode, dir, lineage }
}

/**
 * Lineage a dsh parent sends in `_meta.dsh` of `session/new` and `session/load`, so the
 * session's header links it to its parent, its depth continues the parent's, and a
 * reopened session can be checked against the parent reopening it. It comes off the
 * wire: anything malformed is ignored with a warning, never trusted.
 */
export function lineageOf(meta: unknown, log: { warn(format: string, ...args: unknown[]): void }, method = 'session/new'): Lineage {
  const dsh = typeof meta === 'object' && meta !== null ? (meta as Record<string, unknown>).dsh : undefined
  if (dsh === undefined) return {}
  if (typeof dsh !== 'object' || dsh === null) {
    log.warn('ignoring _meta.dsh of %s: not an object', method)
    return {}
  }
  const { parentSession, delegationDepth, provider, label, maxDepth } = dsh as Record<string, unknown>
  const lineage: Lineage = {}
  if (typeof parentSession === 'string' && /^[A-Za-z0-9._-]{1,128}$/.test(parentSession)) lineage.parentSession = parentSession
  if (Number.isInteger(delegationDepth) && (delegationDepth as number) >= 0) lineage.delegationDepth = delegationDepth as number
  if (typeof provider === 'string' && provider.length <= 64) lineage.provider = provider
  if (typeof label === 'string') lineage.label = label.slice(0, 200)
  if (Number.isSafeInteger(maxDepth) && (maxDepth as number) >= 0) lineage.maxDepth = maxDepth as number
  const dropped = ['parentSession', 'delegationDepth', 'provider', 'label', 'maxDepth'].filter((key) => (dsh as Record<string, unknown>)[key] !== undefined && !(key in lineage))
  if (dropped.length) log.warn('ignoring malformed _meta.dsh field(s) of %s: %s', method, dropped.join(', '))
  return lineage
}
