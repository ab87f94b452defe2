/**
 * A config file's values, checked as the file has them. A flag (`--session-dir`, `--model`,
 * `--record`) is merged over the file's entry before the plugin sees its config, so a bad
 * value the flag replaces would never reach the plugin's own validation: `dsh config check`
 * would refuse the file and `dsh run --session-dir …` would run with it. Every command
 * therefore validates the file's entries (over the defaults, before any flag) with each
 * plugin's `Config` schema, the one Cordis validates with at load.
 */
import { ValidationError } from 'cordis'
import type { PluginEntry } from './config-entries.js'
import { CompositionError, oneLineMessage } from './errors.js'

/** The part of the Standard Schema interface a plugin's `Config` (schemastery) offers. */
interface StandardSchema {
  '~standard': { validate(value: unknown): { issues?: readonly unknown[] } | Promise<unknown> }
}

function standardSchema(plugin: unknown): StandardSchema | undefined {
  const schema = (plugin as { Config?: unknown } | undefined)?.Config
  const standard = (schema as Partial<StandardSchema> | undefined)?.['~standard']
  return typeof standard?.validate === 'function' ? (schema as StandardSchema) : undefined
}

/** Throw naming the entry and the value when its plugin's schema refuses `entry.config`. */
export function checkConfigValues(entry: PluginEntry, plugin: unknown): void {
  const schema = standardSchema(plugin)
  if (!schema) return
  let config: unknown
  try {
    // Validation may fill defaults into what it is given: it works on a copy.
    config = structuredClone(entry.config ?? {})
  } catch {
    // Not data (an embedding program's function): Cordis validates it at load.
    return
  }
  const result = schema['~standard'].validate(config)
  if (result instanceof Promise || !('issues' in result) || !result.issues) return
  // Worded as Cordis words it at load, so a value reads the same whichever check finds it.
  const problem = oneLineMessage(new ValidationError(result.issues as ConstructorParameters<typeof ValidationError>[0]))
  throw new CompositionError('CONFIG_SHAPE', `plugin "${entry.id}" (${entry.name}): ${problem}`, { entryIds: [entry.id] })
}

/**
 * The entries of a config file as it is written: each of `file` laid over the entry of the
 * same id in `defaults`, as `mergeEntries` lays it, without what a flag lays over it.
 */
export function entriesAsWritten(defaults: readonly PluginEntry[], file: readonly PluginEntry[]): PluginEntry[] {
  // A disabled entry composes nothing, so there is nothing of it to check.
  return file.filter((entry) => !entry.disabled).map((entry) => {
    const base = defaults.find((candidate) => candidate.id === entry.id)
    if (!base || base.name !== entry.name) return entry
    return { ...base, ...entry, config: { ...base.config, ...entry.config } }
  })
}
