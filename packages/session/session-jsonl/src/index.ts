import { mkdir, stat } from 'node:fs/promises'
import type { Context } from 'cordis'
import { errorMessage } from '@dsh/base'
import { SessionJsonlError } from './errors.js'
import { Config, resolveSessionDir } from './config.js'
import { JsonlSessionStorage } from './storage.js'

export * from './config.js'
export * from './errors.js'
export * from './format.js'
export { parseSessionFile } from './parse.js'
export { JsonlSessionStorage } from './storage.js'
export { isValidSessionId, sessionFilePath } from './files.js'

export const name = 'session-jsonl'
export const inject = ['sessions']

/**
 * Persist every live session as `<dir>/<id>.jsonl` and read them back for
 * `ctx.sessions.open()`. Unloading flushes and closes every file.
 */
export async function apply(ctx: Context, config: Config): Promise<() => Promise<void>> {
  const dir = resolveSessionDir(config)
  await ensureSessionDir(dir)
  const storage = new JsonlSessionStorage(dir, ctx.logger('session-jsonl'))
  ctx.sessions.registerStorage(storage)
  ctx.sessions.addObserver(storage)
  // Sessions that went live before this plugin (a reload, a new `dir`) are persisted too.
  for (const session of ctx.sessions.list()) storage.attach(session)
  return () => storage.closeAll()
}

export default { name, inject, Config, apply }

/**
 * Create `dir` (and any missing parent, such as `$DSH_HOME`) private to its owner
 * (0700); an existing directory keeps its mode. A path that is a file, or runs through
 * one, fails here, at load, rather than at the first write.
 */
async function ensureSessionDir(dir: string): Promise<void> {
  const notADirectory = (detail: string, cause?: unknown) =>
    new SessionJsonlError('NOT_A_DIRECTORY', `the session directory ${dir} ${detail}; pass a directory (--session-dir, or the plugin's dir)`, { cause })
  try {
    await mkdir(dir, { recursive: true, mode: 0o700 })
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code
    if (code === 'EEXIST' || code === 'ENOTDIR') throw notADirectory('is a file, or a path through a file', error)
    throw new SessionJsonlError('UNREADABLE', `cannot create the session directory ${dir}: ${errorMessage(error)}`, { cause: error })
  }
  if (!(await stat(dir)).isDirectory()) throw notADirectory('is not a directory')
}
