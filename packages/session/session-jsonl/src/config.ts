import { homedir } from 'node:os'
import { join, resolve } from 'node:path'
import Schema from 'schemastery'

export const DEFAULT_SESSION_DIR = '~/.dsh/sessions'

export interface Config {
  /** Directory of the session files; `~` is the home directory, relative paths resolve against the working directory. */
  dir?: string
}

export const Config: Schema<Config> = Schema.object({
  dir: Schema.string().min(1).default(DEFAULT_SESSION_DIR).description('Directory of the session files (`~` = home directory).'),
})

/** The absolute directory a config names: the one place the default and `~` are applied. */
export function resolveSessionDir(config: Config): string {
  const dir = config.dir ?? DEFAULT_SESSION_DIR
  if (dir === '~') return homedir()
  if (dir.startsWith('~/')) return join(homedir(), dir.slice(2))
  return resolve(dir)
}
