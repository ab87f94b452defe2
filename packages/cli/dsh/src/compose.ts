/**
 * Composition: a list of plugin entries (the defaults, then a user's YAML on top) loaded
 * into one Cordis context. Sibling plugins start concurrently; a plugin that waits for
 * a service nobody provides is reported by name instead of hanging.
 */
import { createRequire } from 'node:module'
import { isAbsolute, resolve } from 'node:path'
import { pathToFileURL } from 'node:url'
import { errorMessage, isRecord } from '@dsh/base'
import { Context, type Fiber } from 'cordis'
import type { PluginEntry } from './config-entries.js'
import { checkConfigKeys } from './config-keys.js'
import { checkConfigValues } from './config-values.js'
import { CompositionError, oneLineMessage } from './errors.js'
import { shippedPlugins } from './shipped-plugins.js'
import { waitForStart } from './start.js'

export { mergeEntries, parseEntries, readEntries, type PluginEntry } from './config-entries.js'
export { checkConfigKeys, unknownConfigKeys, type UnknownKey } from './config-keys.js'
export { checkConfigValues, entriesAsWritten } from './config-values.js'
export { CompositionError, type CompositionErrorCode } from './errors.js'

const requireHere = createRequire(import.meta.url)

/** A shipped plugin from the CLI's own table; anything else from disk (a path against the entry's base). */
async function importModule(entry: PluginEntry): Promise<Record<string, unknown>> {
  if (Object.hasOwn(shippedPlugins, entry.name)) return (await shippedPlugins[entry.name]()) as Record<string, unknown>
  const local = entry.name.startsWith('.') || isAbsolute(entry.name)
  let specifier: string
  try {
    specifier = local ? pathToFileURL(resolve(entry.base ?? process.cwd(), entry.name)).href : pathToFileURL(requireHere.resolve(entry.name)).href
  } catch {
    // Not resolvable from here: let import() try the name as it is and report its own error.
    specifier = entry.name
  }
  return (await import(specifier)) as Record<string, unknown>
}

async function importPlugin(entry: PluginEntry): Promise<unknown> {
  let module: Record<string, unknown>
  try {
    module = await importModule(entry)
  } catch (error) {
    // Only the first line: require's "Cannot find module" goes on to list the CLI's own files.
    throw new CompositionError('PLUGIN_LOAD', `plugin "${entry.id}": cannot load ${entry.name}: ${errorMessage(error).split('\n')[0]}`, { entryIds: [entry.id] })
  }
  const plugin = module.default ?? module
  if (typeof plugin !== 'function' && !(isRecord(plugin) && typeof plugin.apply === 'function')) {
    throw new CompositionError('PLUGIN_LOAD', `plugin "${entry.id}": ${entry.name} does not export a plugin (a default export with apply, or a class)`, { entryIds: [entry.id] })
  }
  return plugin
}

export interface Composition {
  ctx: Context
  entries: PluginEntry[]
  fibers: Map<string, Fiber>
  dispose(): Promise<void>
}

/**
 * Check entries without starting anything: every key declared (`checkConfigKeys`) and every
 * value accepted by its plugin's schema (`checkConfigValues`). A host runs it on a config
 * file's entries as written (`entriesAsWritten`), so a flag merged over a bad value does
 * not hide it. Rejects with the first problem, naming its entry.
 */
export async function checkEntries(entries: readonly PluginEntry[]): Promise<void> {
  const plugins = await Promise.all(entries.map(async (entry) => [entry, await importPlugin(entry)] as const))
  for (const [entry, plugin] of plugins) {
    checkConfigKeys(entry, plugin)
    checkConfigValues(entry, plugin)
  }
}

/** Load every entry into `ctx`; rejects with the first failure, naming its entry. */
export async function compose(ctx: Context, entries: readonly PluginEntry[], options: { startTimeoutMs?: number } = {}): Promise<Composition> {
  const plugins = await Promise.all(entries.map(async (entry) => [entry, await importPlugin(entry)] as const))
  const fibers = new Map<string, Fiber>()
  const failures: Promise<never>[] = []
  for (const [entry, plugin] of plugins) checkConfigKeys(entry, plugin)
  for (const [entry, plugin] of plugins) {
    // eslint-disable-next-line @typescript-eslint/no-explicit-any -- plugins are validated above; cordis types them loosely
    const fiber = ctx.plugin(plugin as any, entry.config ?? {})
    fibers.set(entry.id, fiber)
    failures.push(
      Promise.resolve(fiber).then(
        () => new Promise<never>(() => {}),
        (error: unknown) => {
          throw new CompositionError('PLUGIN_START', `plugin "${entry.id}" (${entry.name}) failed to start: ${oneLineMessage(error)}`, { entryIds: [entry.id] })
        },
      ),
    )
  }
  const startWatch = new AbortController()
  try {
    await Promise.race([waitForStart(ctx, entries, fibers, { startTimeoutMs: options.startTimeoutMs ?? 10_000, signal: startWatch.signal }), ...failures])
  } finally {
    startWatch.abort()
  }
  return {
    ctx,
    entries: [...entries],
    fibers,
    dispose: () => ctx.fiber.dispose(),
  }
}
