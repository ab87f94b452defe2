/**
 * Strict config keys. A schemastery `object` passes keys it does not declare through
 * untouched, so a misspelt key (`toolFilter: { alow: [...] }`) would silently do nothing.
 * This walks a plugin's `Config` schema alongside the given config and reports every key
 * the schema does not declare, at any depth: into declared object properties, dict values,
 * array and tuple items, and the branches of unions and intersections that hold objects.
 */
import { isRecord } from '@dsh/base'
import type { PluginEntry } from './config-entries.js'
import { CompositionError } from './errors.js'

/** The parts of a schemastery schema the walk reads (schemastery types them loosely). */
interface SchemaNode {
  type: string
  dict?: Record<string, SchemaNode>
  inner?: SchemaNode
  list?: SchemaNode[]
  builder?: () => SchemaNode
  (value: unknown): unknown
}

export interface UnknownKey {
  /** Where the key sits, as a user would write it: `toolFilter.alow`, `servers[1].urll`. */
  path: string
  /** The keys the schema declares at that place (empty: it declares none). */
  allowed: string[]
}

function isSchema(value: unknown): value is SchemaNode {
  return typeof value === 'function' && typeof (value as { type?: unknown }).type === 'string'
}

function child(path: string, key: string | number): string {
  if (typeof key === 'number') return `${path}[${key}]`
  const segment = /^[A-Za-z_$][\w$-]*$/.test(key) ? key : JSON.stringify(key)
  return path ? (segment.startsWith('"') ? `${path}[${segment}]` : `${path}.${segment}`) : segment
}

/** Every key in `value` that `schema` does not declare, depth first. */
export function unknownConfigKeys(schema: unknown, value: unknown, path = ''): UnknownKey[] {
  if (!isSchema(schema) || value === undefined || value === null) return []
  switch (schema.type) {
    case 'object': {
      if (!isRecord(value)) return []
      const dict = schema.dict ?? {}
      return Object.keys(value).flatMap((key) =>
        Object.hasOwn(dict, key) ? unknownConfigKeys(dict[key], value[key], child(path, key)) : [{ path: child(path, key), allowed: Object.keys(dict) }],
      )
    }
    case 'dict':
      return isRecord(value) ? Object.keys(value).flatMap((key) => unknownConfigKeys(schema.inner, value[key], child(path, key))) : []
    case 'array':
      return Array.isArray(value) ? value.flatMap((item, index) => unknownConfigKeys(schema.inner, item, child(path, index))) : []
    case 'tuple':
      return Array.isArray(value) ? (schema.list ?? []).flatMap((item, index) => unknownConfigKeys(item, value[index], child(path, index))) : []
    case 'union':
      return unionUnknowns(schema.list ?? [], value, path)
    case 'intersect':
      return intersectUnknowns(schema.list ?? [], value, path)
    case 'transform':
      return unknownConfigKeys(schema.inner, value, path)
    case 'lazy':
      return unknownConfigKeys(isSchema(schema.inner) ? schema.inner : schema.builder?.(), value, path)
    default:
      // Scalars, `any`, `is`, constants: nothing below them is a declared key.
      return []
  }
}

/**
 * A union holds if any branch accepts the value with no unknown key. Otherwise the
 * branch that accepts it with the fewest unknown keys is the one the user meant; a value
 * no branch accepts is a type error, which the plugin's own validation reports.
 */
function unionUnknowns(branches: SchemaNode[], value: unknown, path: string): UnknownKey[] {
  let best: UnknownKey[] | undefined
  for (const branch of branches) {
    if (!accepts(branch, value)) continue
    const found = unknownConfigKeys(branch, value, path)
    if (found.length === 0) return []
    if (!best || found.length < best.length) best = found
  }
  return best ?? []
}

/**
 * Every branch of an intersection sees the whole value. A key is unknown when every
 * branch finds it unknown, either itself or a key above it (one branch that does not
 * declare `b` at all and one that declares `b` but not `b.d` agree that `b.d` is wrong).
 */
function intersectUnknowns(branches: SchemaNode[], value: unknown, path: string): UnknownKey[] {
  const perBranch = branches.map((branch) => unknownConfigKeys(branch, value, path))
  if (perBranch.length === 0) return []
  const covers = (found: UnknownKey[], target: string) => found.some(({ path: other }) => other === target || target.startsWith(`${other}.`) || target.startsWith(`${other}[`))
  const result = new Map<string, UnknownKey>()
  for (const found of perBranch) {
    for (const unknown of found) {
      if (result.has(unknown.path) || !perBranch.every((other) => covers(other, unknown.path))) continue
      const allowed = perBranch.flatMap((other) => other.find((candidate) => candidate.path === unknown.path)?.allowed ?? [])
      result.set(unknown.path, { path: unknown.path, allowed: [...new Set(allowed)] })
    }
  }
  return [...result.values()]
}

function accepts(schema: SchemaNode, value: unknown): boolean {
  try {
    // Validation may fill defaults into what it is given: let it work on a copy.
    schema(structuredClone(value))
    return true
  } catch {
    // A branch that rejects the value is simply not the one the user meant.
    return false
  }
}

/** Throw naming the entry and every unknown key's path when `entry.config` has keys its plugin does not declare. */
export function checkConfigKeys(entry: PluginEntry, plugin: unknown): void {
  const config = entry.config ?? {}
  if (Object.keys(config).length === 0) return
  const schema = (plugin as { Config?: unknown } | undefined)?.Config
  const found: UnknownKey[] = isSchema(schema) ? unknownConfigKeys(schema, config) : Object.keys(config).map((key) => ({ path: child('', key), allowed: [] }))
  if (found.length === 0) return
  const described = found.map((unknown) => `"${unknown.path}" (${unknown.allowed.length ? `allowed there: ${unknown.allowed.join(', ')}` : 'nothing is configurable there'})`)
  throw new CompositionError('UNKNOWN_KEY', `plugin "${entry.id}" (${entry.name}): unknown config key${found.length > 1 ? 's' : ''} ${described.join(', ')}`, { entryIds: [entry.id] })
}
