/**
 * Composition: a list of plugin entries (the defaults, then a user's YAML on top) loaded
 * into one Cordis context. Sibling plugins start concurrently; a plugin that waits for
 * a service nobody provides is reported by name instead of hanging.
 */
import { readFile } from 'node:fs/promises'
import { createRequire } from 'node:module'
import { dirname, isAbsolute, resolve } from 'node:path'
import { pathToFileURL } from 'node:url'
import { Context, type Fiber } from 'cordis'
import YAML from 'yaml'

export interface PluginEntry {
  /** Unique within a composition; a user entry with a default's id replaces that default. */
  id: string
  /** A package name (`@dsh/tool-subagent`) or a path relative to the config file. */
  name: string
  config?: Record<string, unknown>
  disabled?: boolean
  /** Directory relative `name`s resolve against. */
  base?: string
}

export class CompositionError extends Error {
  override name = 'CompositionError'
}

/** Read a YAML (or JSON) list of entries `{ id?, name, config?, disabled? }`, validated. */
export async function readEntries(file: string): Promise<PluginEntry[]> {
  let text: string
  try {
    text = await readFile(file, 'utf8')
  } catch (error) {
    throw new CompositionError(`cannot read config ${file}: ${(error as Error).message}`)
  }
  let parsed: unknown
  try {
    parsed = YAML.parse(text)
  } catch (error) {
    throw new CompositionError(`${file} is not valid YAML: ${(error as Error).message}`)
  }
  const list = Array.isArray(parsed) ? parsed : isRecord(parsed) && Array.isArray(parsed.plugins) ? parsed.plugins : undefined
  if (!list) throw new CompositionError(`${file}: expected a list of plugin entries (or { plugins: [...] })`)
  const seen = new Set<string>()
  return list.map((raw: unknown, index: number) => {
    const where = `${file}: plugins[${index}]`
    if (!isRecord(raw)) throw new CompositionError(`${where}: an entry must be a mapping with a "name"`)
    for (const key of Object.keys(raw)) {
      if (!['id', 'name', 'config', 'disabled'].includes(key)) throw new CompositionError(`${where}: unknown key "${key}" (allowed: id, name, config, disabled)`)
    }
    if (typeof raw.name !== 'string' || !raw.name) throw new CompositionError(`${where}.name: must be a package name or path`)
    if (raw.id !== undefined && typeof raw.id !== 'string') throw new CompositionError(`${where}.id: must be a string`)
    if (raw.config !== undefined && raw.config !== null && !isRecord(raw.config)) throw new CompositionError(`${where}.config: must be a mapping`)
    if (raw.disabled !== undefined && typeof raw.disabled !== 'boolean') throw new CompositionError(`${where}.disabled: must be true or false`)
    let id = (raw.id as string | undefined) ?? raw.name
    if (raw.id === undefined) for (let n = 2; seen.has(id); n++) id = `${raw.name}#${n}`
    if (seen.has(id)) throw new CompositionError(`${where}.id: "${id}" is used twice`)
    seen.add(id)
    const entry: PluginEntry = { id, name: raw.name, base: dirname(resolve(file)) }
    if (isRecord(raw.config)) entry.config = raw.config
    if (raw.disabled === true) entry.disabled = true
    return entry
  })
}

/** Defaults first, then user entries: same id replaces (config merged over the default's), new ids append. */
export function mergeEntries(defaults: readonly PluginEntry[], overrides: readonly PluginEntry[]): PluginEntry[] {
  const merged = defaults.map((entry) => ({ ...entry }))
  for (const override of overrides) {
    const index = merged.findIndex((entry) => entry.id === override.id)
    if (index < 0) merged.push(override)
    else {
      const base = merged[index]
      merged[index] = {
        ...base,
        ...override,
        config: base.name === override.name ? { ...base.config, ...override.config } : override.config,
      }
    }
  }
  return merged.filter((entry) => !entry.disabled)
}

const requireHere = createRequire(import.meta.url)

async function importPlugin(entry: PluginEntry): Promise<unknown> {
  const local = entry.name.startsWith('.') || isAbsolute(entry.name)
  let specifier: string
  try {
    specifier = local ? pathToFileURL(resolve(entry.base ?? process.cwd(), entry.name)).href : pathToFileURL(requireHere.resolve(entry.name)).href
  } catch {
    specifier = entry.name
  }
  let module: Record<string, unknown>
  try {
    module = (await import(specifier)) as Record<string, unknown>
  } catch (error) {
    throw new CompositionError(`plugin "${entry.id}": cannot load ${entry.name}: ${(error as Error).message}`)
  }
  const plugin = module.default ?? module
  if (typeof plugin !== 'function' && !(isRecord(plugin) && typeof plugin.apply === 'function')) {
    throw new CompositionError(`plugin "${entry.id}": ${entry.name} does not export a plugin (a default export with apply, or a class)`)
  }
  return plugin
}

export interface Composition {
  ctx: Context
  entries: PluginEntry[]
  fibers: Map<string, Fiber>
  dispose(): Promise<void>
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
          throw new CompositionError(`plugin "${entry.id}" (${entry.name}) failed to start: ${describe(error)}`)
        },
      ),
    )
  }
  await Promise.race([waitForStart(ctx, entries, fibers, options.startTimeoutMs ?? 5000), ...failures])
  return {
    ctx,
    entries: [...entries],
    fibers,
    dispose: () => ctx.fiber.dispose(),
  }
}

/**
 * A config key the plugin does not know is a typo until proven otherwise: its schema
 * would pass it through untouched and the setting would silently do nothing.
 */
export function checkConfigKeys(entry: PluginEntry, plugin: unknown): void {
  const given = Object.keys(entry.config ?? {})
  if (given.length === 0) return
  const schema = (plugin as { Config?: { type?: unknown; dict?: Record<string, unknown> } }).Config
  const allowed = schema?.type === 'object' && schema.dict ? Object.keys(schema.dict) : []
  const unknown = given.filter((key) => !allowed.includes(key))
  if (unknown.length === 0) return
  const known = allowed.length ? `allowed: ${allowed.join(', ')}` : 'it takes no config'
  throw new CompositionError(`plugin "${entry.id}" (${entry.name}): unknown config key${unknown.length > 1 ? 's' : ''} ${unknown.map((key) => `"${key}"`).join(', ')} (${known})`)
}

const ACTIVE = 2
const FAILED = 3

async function waitForStart(ctx: Context, entries: readonly PluginEntry[], fibers: Map<string, Fiber>, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs
  let lastProgress = Date.now()
  let lastActive = -1
  for (;;) {
    const states = [...fibers.values()].map((fiber) => fiber.state as number)
    const active = states.filter((state) => state === ACTIVE).length
    if (active === fibers.size) return
    if (active !== lastActive) {
      lastActive = active
      lastProgress = Date.now()
    }
    const missingFor = (entry: PluginEntry) => Object.keys(fibers.get(entry.id)!.inject ?? {}).filter((name) => ctx.get(name) === undefined)
    const waiting = entries.filter((entry) => fibers.get(entry.id)!.state !== ACTIVE)
    // A plugin still waiting for a service after everything else stopped moving will wait forever.
    const starved = Date.now() - lastProgress > 300 && waiting.some((entry) => missingFor(entry).length > 0)
    const failed = entries.find((entry) => fibers.get(entry.id)!.state === FAILED)
    if (failed) throw new CompositionError(`plugin "${failed.id}" (${failed.name}) failed to start (the error is logged above)`)
    if (starved || Date.now() > deadline) {
      const lines = waiting.map((entry) => {
        const missing = missingFor(entry)
        return `"${entry.id}" (${entry.name}) is waiting for ${missing.length ? missing.map((name) => `ctx.${name}`).join(', ') : 'its start to finish'}`
      })
      throw new CompositionError(`some plugins did not start: ${lines.join('; ')}`)
    }
    await new Promise((resolveTimer) => setTimeout(resolveTimer, 5))
  }
}

function describe(error: unknown): string {
  if (error instanceof Error) return error.message.replace(/\n\s*/g, ' ')
  return String(error)
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}
