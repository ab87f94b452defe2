import { errorMessage } from '@dsh/base'
import { parse as parseYaml } from 'yaml'
import { compileScript } from './compile-script.js'
import { ScriptError } from './errors.js'
import type { CompiledScript, Script } from './script.js'

export type ScriptFormat = 'yaml' | 'json'

/** Parse script text and compile it; every failure names `source`. */
export function compileScriptText(text: string, source: string, format: ScriptFormat): CompiledScript {
  return compileScript(parseScriptValue(text, source, format), source)
}

/**
 * Parse and validate a script written in YAML or JSON (YAML is a superset of JSON), for
 * building an adapter without files: `new ScriptedAdapter({ scripts: { demo: parseScript(text) } })`.
 */
export function parseScript(text: string, source = 'script'): Script {
  const value = parseScriptValue(text, source, 'yaml')
  compileScript(value, source)
  return value as Script
}

function parseScriptValue(text: string, source: string, format: ScriptFormat): unknown {
  try {
    return format === 'json' ? JSON.parse(text) : parseYaml(text)
  } catch (error) {
    const message = errorMessage(error)
    const language = format === 'json' ? 'JSON' : 'YAML'
    throw new ScriptError('INVALID_SCRIPT', `${source}: invalid ${language}: ${message}`, { cause: error })
  }
}
