import { createHash } from 'node:crypto'

/** What names one `agent()` call across runs of a workflow: a change to any of these is a different call. */
export interface CallIdentity {
  /** The helper definition's file hash ('' for a plain provider child). */
  definitionHash: string
  provider: string
  /** The model the call names, its own or its helper's ('' when it runs on the run's default). */
  model: string
  prompt: string
  /** The options that change what the child does (not its label). */
  options: { schema?: unknown; workspace?: string }
}

/** A call's key: a SHA-256 over its identity (stable JSON: keys sorted). */
export function callKey(identity: CallIdentity): string {
  return createHash('sha256').update(stableJson(identity)).digest('hex').slice(0, 32)
}

export function sha256(text: string): string {
  return createHash('sha256').update(text).digest('hex')
}

function stableJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(stableJson).join(',')}]`
  if (value !== null && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>).filter(([, item]) => item !== undefined)
    entries.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    return `{${entries.map(([key, item]) => `${JSON.stringify(key)}:${stableJson(item)}`).join(',')}}`
  }
  return JSON.stringify(value) ?? 'null'
}
