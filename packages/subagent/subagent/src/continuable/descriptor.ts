/**
 * The durable descriptor of a continuable child, as written into its session header and
 * read back on cold resume. Strict both ways: explicit fields only, unknown keys and
 * unknown versions are refused, so a child is never rebuilt from a guess.
 */
import { isRecord } from '@dsh/base'
import type { ToolFilter } from '@dsh/tools'
import { DESCRIPTOR_VERSION, type ContinuableDescriptor } from './types.js'

const KNOWN_KEYS = new Set(['version', 'mode', 'provider', 'label', 'model', 'persona', 'toolFilter', 'remote'])

/** A descriptor with only the fields that are set (JSON has no `undefined`). */
export function makeDescriptor(fields: { provider: string; label: string; model?: string; persona?: string; toolFilter?: ToolFilter }): ContinuableDescriptor {
  const descriptor: ContinuableDescriptor = { version: DESCRIPTOR_VERSION, mode: 'continuable', provider: fields.provider, label: fields.label }
  if (fields.model !== undefined) descriptor.model = fields.model
  if (fields.persona !== undefined) descriptor.persona = fields.persona
  if (fields.toolFilter !== undefined) {
    const filter: { allow?: string[]; deny?: string[] } = {}
    if (fields.toolFilter.allow) filter.allow = [...fields.toolFilter.allow]
    if (fields.toolFilter.deny) filter.deny = [...fields.toolFilter.deny]
    descriptor.toolFilter = filter
  }
  return descriptor
}

/** The descriptor in `value`, or the reason it is not one this build can rebuild a child from. */
export function parseDescriptor(value: unknown): { descriptor: ContinuableDescriptor } | { problem: string } {
  if (value === undefined) return { problem: 'its session has no continuable descriptor (it was not started as a continuable child)' }
  if (!isRecord(value)) return { problem: 'its descriptor is not an object' }
  if (value.version !== DESCRIPTOR_VERSION) return { problem: `its descriptor has version ${JSON.stringify(value.version)}; this build reads version ${DESCRIPTOR_VERSION}` }
  const unknown = Object.keys(value).filter((key) => !KNOWN_KEYS.has(key))
  if (unknown.length > 0) return { problem: `its descriptor has unknown fields: ${unknown.join(', ')}` }
  if (value.mode !== 'continuable') return { problem: `its descriptor has mode ${JSON.stringify(value.mode)}, not "continuable"` }
  for (const key of ['provider', 'label'] as const) {
    if (typeof value[key] !== 'string' || !value[key]) return { problem: `its descriptor's ${key} must be non-empty text` }
  }
  for (const key of ['model', 'persona'] as const) {
    if (value[key] !== undefined && typeof value[key] !== 'string') return { problem: `its descriptor's ${key} must be text` }
  }
  const filter = value.toolFilter
  if (filter !== undefined) {
    const lists = isRecord(filter) ? [filter.allow, filter.deny] : []
    const valid = isRecord(filter) && Object.keys(filter).every((key) => key === 'allow' || key === 'deny') && lists.some((list) => list !== undefined) &&
      lists.every((list) => list === undefined || (Array.isArray(list) && list.every((name) => typeof name === 'string')))
    if (!valid) return { problem: 'its descriptor\'s toolFilter must have `allow` and/or `deny` lists of tool names' }
  }
  const remote = value.remote
  if (remote !== undefined) {
    const valid = isRecord(remote) && typeof remote.remoteId === 'string' && remote.remoteId !== '' && (remote.resumeData === undefined || isRecord(remote.resumeData)) &&
      Object.keys(remote).every((key) => key === 'remoteId' || key === 'resumeData')
    if (!valid) return { problem: 'its descriptor\'s remote record must be { remoteId, resumeData? }' }
  }
  return { descriptor: value as unknown as ContinuableDescriptor }
}
