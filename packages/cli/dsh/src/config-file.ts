import { existsSync } from 'node:fs'
import { homedir } from 'node:os'
import { join, resolve } from 'node:path'

/**
 * The config a command composes when `--config` is not given: `dsh.yml` in the working
 * directory, else `config.yml` in the dsh home (`$DSH_HOME`, else `~/.dsh`). None is fine.
 */
export function discoverConfig(cwd = process.cwd(), env: NodeJS.ProcessEnv = process.env): string | undefined {
  const candidates = [join(cwd, 'dsh.yml'), join(dshHome(env), 'config.yml')]
  return candidates.find((file) => existsSync(file))
}

export function dshHome(env: NodeJS.ProcessEnv = process.env): string {
  return env.DSH_HOME ? resolve(env.DSH_HOME) : join(homedir(), '.dsh')
}
