import { existsSync, readFileSync } from 'node:fs'
import { homedir } from 'node:os'
import { join, resolve } from 'node:path'
import { errorMessage } from '@dsh/base'
import { configDigest, PROJECT_CONFIG, readTrustedConfigs, realDirectory, type TrustedConfig } from './config-trust.js'
import { CompositionError } from './errors.js'

/**
 * Which config a command composes, and whether it may: the one place that decides.
 *
 * - `named`: `--config FILE` (the user chose it, whoever wrote it);
 * - `project`: `./dsh.yml`, which the user trusted (`dsh trust`) as its bytes are now;
 * - `untrusted`: `./dsh.yml` the user has not trusted, or that changed since: it is not
 *   used and the command refuses (`refusal`, one line) before anything starts;
 * - `user`: `$DSH_HOME/config.yml` (`~/.dsh/config.yml`), when there is no `./dsh.yml`;
 * - `none`: the defaults alone.
 *
 * A project's dsh.yml shadows the user's config.yml (as it always has), so an untrusted
 * one refuses rather than silently running on another config than the one in sight.
 */
export type ConfigChoice =
  | { kind: 'none' }
  | { kind: 'named' | 'user'; file: string }
  /** `text`: the very bytes whose digest was trusted, so a change after the check is not read. */
  | { kind: 'project'; file: string; text: string }
  | { kind: 'untrusted'; file: string; text: string; refusal: string }

export function chooseConfig(options: { config?: string; ignoreDiscoveredConfig?: boolean }, cwd = process.cwd(), env: NodeJS.ProcessEnv = process.env): ConfigChoice {
  if (options.config !== undefined) return { kind: 'named', file: options.config }
  if (options.ignoreDiscoveredConfig) return { kind: 'none' }
  const home = dshHome(env)
  const userConfig = join(home, 'config.yml')
  const project = join(cwd, PROJECT_CONFIG)
  if (existsSync(project)) {
    let bytes: Buffer
    try {
      bytes = readFileSync(project)
    } catch (error) {
      throw new CompositionError('CONFIG_READ', `dsh: cannot read config ${project}: ${errorMessage(error)}`)
    }
    const dir = realDirectory(cwd)
    const trusted = readTrustedConfigs(home).find((entry) => entry.dir === dir)
    const text = bytes.toString('utf8')
    if (trusted?.sha256 === configDigest(bytes)) return { kind: 'project', file: project, text }
    return { kind: 'untrusted', file: project, text, refusal: untrustedLine(project, trusted, userConfig) }
  }
  return existsSync(userConfig) ? { kind: 'user', file: userConfig } : { kind: 'none' }
}

/** The file a choice composes, if any (the untrusted one is named, though never composed). */
export function chosenFile(choice: ConfigChoice): string | undefined {
  return choice.kind === 'none' ? undefined : choice.file
}

/** Why a found `./dsh.yml` is not used, and the three ways on: one line. */
function untrustedLine(project: string, trusted: TrustedConfig | undefined, userConfig: string): string {
  const why = trusted
    ? `it changed since you trusted it on ${trusted.trustedAt} (a git pull or a command can change it)`
    : 'it came with this directory and you have not trusted it'
  const own = existsSync(userConfig) ? `\`--config ${userConfig}\` (or move ${PROJECT_CONFIG} away) to use your own` : `move ${PROJECT_CONFIG} away to run on the defaults (there is no ${userConfig})`
  return (
    `dsh: not using ${project}: ${why}, and a project's config can allow commands, turn the sandbox off, load code or send your API keys to its own server; ` +
    `run \`dsh trust\`${trusted ? ' after reading it' : ''} to trust this directory's ${PROJECT_CONFIG}, \`--config ${PROJECT_CONFIG}\` to use it once, or ${own}`
  )
}

export function dshHome(env: NodeJS.ProcessEnv = process.env): string {
  return env.DSH_HOME ? resolve(env.DSH_HOME) : join(homedir(), '.dsh')
}
