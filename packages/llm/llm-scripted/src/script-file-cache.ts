import { errorMessage } from '@dsh/base'
import { readFile, stat } from 'node:fs/promises'
import { extname } from 'node:path'
import { ScriptError } from './errors.js'
import { compileScriptText } from './parse-script.js'
import type { CompiledScript } from './script.js'

interface CachedScript {
  script: CompiledScript
  mtimeMs: number
  size: number
  /** When the file was last stat'ed (Date.now()). */
  checkedAt: number
}

/**
 * Compiled script files by absolute path. A file is stat'ed again only after `recheckMs`,
 * so thousands of requests a second cost a map lookup each, while an edited script is
 * still picked up within about a second.
 */
export class ScriptFileCache {
  private entries = new Map<string, CachedScript>()
  /** Loads in flight, so concurrent first requests read a file once. */
  private loading = new Map<string, Promise<CompiledScript>>()

  constructor(private recheckMs = 1000) {}

  async get(absolutePath: string): Promise<CompiledScript> {
    const cached = this.entries.get(absolutePath)
    if (cached && Date.now() - cached.checkedAt < this.recheckMs) return cached.script
    let pending = this.loading.get(absolutePath)
    if (!pending) {
      pending = this.refresh(absolutePath, cached).finally(() => this.loading.delete(absolutePath))
      this.loading.set(absolutePath, pending)
    }
    return pending
  }

  private async refresh(absolutePath: string, cached: CachedScript | undefined): Promise<CompiledScript> {
    try {
      const stats = await stat(absolutePath)
      if (cached && stats.mtimeMs === cached.mtimeMs && stats.size === cached.size) {
        cached.checkedAt = Date.now()
        return cached.script
      }
      const text = await readFile(absolutePath, 'utf8')
      const format = extname(absolutePath).toLowerCase() === '.json' ? 'json' : 'yaml'
      const script = compileScriptText(text, absolutePath, format)
      this.entries.set(absolutePath, { script, mtimeMs: stats.mtimeMs, size: stats.size, checkedAt: Date.now() })
      return script
    } catch (error) {
      if (error instanceof ScriptError) throw error
      const reason = errorMessage(error)
      throw new ScriptError(
        'UNREADABLE_SCRIPT',
        `scripted model: cannot read script file ${absolutePath}: ${reason} ` +
          '(in a model spec scripted:NAME, NAME is an inline script name or a script file path relative to the working directory)',
        { cause: error },
      )
    }
  }
}
