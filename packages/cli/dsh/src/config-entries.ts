/**
 * The config file: a YAML (or JSON) list of plugin entries, and how a user's entries are
 * laid over the defaults.
 */
import { readFile } from 'node:fs/promises'
import { dirname, isAbsolute, resolve } from 'node:path'
import { errorMessage, isRecord } from '@dsh/base'
import YAML from 'yaml'
import { CompositionError } from './errors.js'

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

const ENTRY_KEYS = ['id', 'name', 'config', 'disabled']

/**
 * Config keys of shipped plugins that hold a directory: written relative in a config file,
 * they are relative to that file, as a user reading the file expects, not to wherever dsh
 * happens to be started from (an example config works from any directory).
 */
const FILE_RELATIVE_KEYS: Readonly<Record<string, readonly string[]>> = {
  '@dsh/session-jsonl': ['dir'],
  '@dsh/subagent-acp': ['cwd'],
  '@dsh/subagent-codex': ['cwd'],
  '@dsh/subagent-claude-code': ['cwd'],
  '@dsh/agent-definitions': ['dirs'],
}

function withFileRelativePaths(name: string, config: Record<string, unknown>, base: string): Record<string, unknown> {
  const keys = FILE_RELATIVE_KEYS[name]
  if (!keys?.some((key) => typeof config[key] === 'string' || Array.isArray(config[key]))) return config
  const resolved = { ...config }
  const relative = (value: unknown) => (typeof value === 'string' && value !== '' && !isAbsolute(value) ? resolve(base, value) : value)
  for (const key of keys) {
    const value = resolved[key]
    // A list of directories (agent definitions' `dirs`): each relative to the file.
    resolved[key] = Array.isArray(value) ? value.map(relative) : relative(value)
  }
  return resolved
}

/** Read a YAML (or JSON) list of entries `{ id?, name, config?, disabled? }`, validated. */
export async function readEntries(file: string): Promise<PluginEntry[]> {
  let text: string
  try {
    text = await readFile(file, 'utf8')
  } catch (error) {
    throw new CompositionError('CONFIG_READ', `cannot read config ${file}: ${errorMessage(error)}`)
  }
  return parseEntries(text, file)
}

/** The entries of a config file's text; `file` names it in errors and anchors relative names. */
export function parseEntries(text: string, file: string): PluginEntry[] {
  let parsed: unknown
  try {
    // Warnings (an unresolved `!tag`) count as errors: a config is read exactly or not at
    // all, and YAML would otherwise print them as process warnings.
    const document = YAML.parseDocument(text, { logLevel: 'silent' })
    const [problem] = [...document.errors, ...document.warnings]
    if (problem) throw problem
    parsed = document.toJS()
  } catch (error) {
    throw new CompositionError('CONFIG_SYNTAX', `${file} is not valid YAML: ${yamlProblem(error)}`)
  }
  const list = Array.isArray(parsed) ? parsed : isRecord(parsed) && Array.isArray(parsed.plugins) ? parsed.plugins : undefined
  if (!list) throw new CompositionError('CONFIG_SHAPE', `${file}: expected a list of plugin entries (or { plugins: [...] })`)
  const seen = new Set<string>()
  return list.map((raw: unknown, index: number) => {
    const where = `${file}: plugins[${index}]`
    if (!isRecord(raw)) throw new CompositionError('CONFIG_SHAPE', `${where}: an entry must be a mapping with a "name"`)
    for (const key of Object.keys(raw)) {
      if (!ENTRY_KEYS.includes(key)) throw new CompositionError('UNKNOWN_KEY', `${where}: unknown key "${key}" (allowed: ${ENTRY_KEYS.join(', ')})`)
    }
    if (typeof raw.name !== 'string' || !raw.name) throw new CompositionError('CONFIG_SHAPE', `${where}.name: must be a package name or path`)
    if (raw.id !== undefined && (typeof raw.id !== 'string' || !raw.id)) throw new CompositionError('CONFIG_SHAPE', `${where}.id: must be a non-empty string`)
    if (raw.config !== undefined && raw.config !== null && !isRecord(raw.config)) throw new CompositionError('CONFIG_SHAPE', `${where}.config: must be a mapping`)
    if (raw.disabled !== undefined && typeof raw.disabled !== 'boolean') throw new CompositionError('CONFIG_SHAPE', `${where}.disabled: must be true or false`)
    let id = (raw.id as string | undefined) ?? raw.name
    if (raw.id === undefined) for (let n = 2; seen.has(id); n++) id = `${raw.name}#${n}`
    if (seen.has(id)) throw new CompositionError('CONFIG_SHAPE', `${where}.id: "${id}" is used twice`)
    seen.add(id)
    const entry: PluginEntry = { id, name: raw.name, base: dirname(resolve(file)) }
    if (isRecord(raw.config)) entry.config = withFileRelativePaths(raw.name, raw.config, entry.base!)
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

/**
 * A YAML error's first line, then the snippet the parser drew under it (the offending line
 * and a caret), indented: where the mistake is matters more than the one-line rule.
 */
function yamlProblem(error: unknown): string {
  const [head = '', ...rest] = errorMessage(error).split('\n')
  const snippet = rest.filter((line) => line.trim() !== '')
  return snippet.length > 0 ? `${head}\n${snippet.map((line) => `    ${line}`).join('\n')}` : head
}
