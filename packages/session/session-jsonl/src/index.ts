import { mkdir } from 'node:fs/promises'
import type { Context } from 'cordis'
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
  await mkdir(dir, { recursive: true })
  const storage = new JsonlSessionStorage(dir, ctx.logger('session-jsonl'))
  ctx.sessions.registerStorage(storage)
  ctx.sessions.addObserver(storage)
  // Sessions that went live before this plugin (a reload, a new `dir`) are persisted too.
  for (const session of ctx.sessions.list()) storage.attach(session)
  return () => storage.closeAll()
}

export default { name, inject, Config, apply }
