/**
 * `dsh trust [DIR]`, `dsh trust --list`, `dsh trust --remove DIR`: which project configs
 * (`DIR/dsh.yml`) dsh composes when started in their directory, and which project hook
 * files (`.claude/settings.json`, …) the hooks entry may run there (`config-trust.ts`).
 * Nothing here composes or loads the config it trusts.
 */
import { existsSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { printable } from '@dsh/base'
import { parseVerbArgs } from '../args.js'
import { parseEntries } from '../config-entries.js'
import { dshHome } from '../config-file.js'
import { configDigest, PROJECT_CONFIG, readTrustedConfigs, readTrustedFiles, trustFile, trustProjectDirectory, untrustProjectConfig, type TrustedConfig } from '../config-trust.js'
import { UsageError } from '../errors.js'
import { shippedPlugins } from '../shipped-plugins.js'

export function trustVerb(args: string[]): number {
  const { values, positionals } = parseVerbArgs('trust', {
    args,
    allowPositionals: true,
    options: { list: { type: 'boolean', default: false }, remove: { type: 'string' } },
  })
  const home = dshHome()
  if (values.list || values.remove !== undefined) {
    if (positionals.length > 0 || (values.list && values.remove !== undefined)) throw new UsageError('USAGE', 'dsh trust: --list and --remove DIR take nothing else (dsh trust --help)')
    return values.list ? list(home) : remove(home, values.remove!)
  }
  if (positionals.length > 1) throw new UsageError('USAGE', `dsh trust: one directory at a time (got ${positionals.length})`)
  const { config, files } = trustProjectDirectory(home, positionals[0] ?? process.cwd())
  const lines: string[] = []
  if (config) {
    const { record, bytes } = config
    const file = join(record.dir, PROJECT_CONFIG)
    lines.push(`dsh: trusted ${file} (sha256 ${record.sha256.slice(0, 16)}…): dsh uses it when started in ${record.dir} until its content changes; a change (a git pull) is refused until you trust it again`)
    const code = codeItLoads(bytes, file)
    if (code.length > 0) lines.push(`note: it loads code that this trust does not pin, which runs as you at every start: ${code.join(', ')}`)
  }
  // A project's hook files run commands: trusted here, as they are now, for the hooks entry's projectClaudeSettings / projectCodexHooks.
  for (const trusted of files) lines.push(`dsh: trusted ${join(trusted.dir, trusted.file)} (sha256 ${trusted.sha256.slice(0, 16)}…): its hooks run when dsh starts in ${trusted.dir} and your hooks entry sets ${trusted.file.startsWith('.codex/') ? 'projectCodexHooks' : 'projectClaudeSettings'}: true, until its content changes`)
  process.stdout.write(printable(`${lines.join('\n')}\n`))
  return 0
}

/** Entries that load code from outside dsh (a plugin by path, an installed package): what their files hold may change without the digest changing. */
function codeItLoads(bytes: Buffer, file: string): string[] {
  try {
    return parseEntries(bytes.toString('utf8'), file)
      .filter((entry) => !entry.disabled && !Object.hasOwn(shippedPlugins, entry.name))
      .map((entry) => `${entry.name} (entry "${entry.id}")`)
  } catch {
    // Not a config dsh can read: every run says why, in its own line.
    return []
  }
}

function list(home: string): number {
  const configs = readTrustedConfigs(home)
  const files = readTrustedFiles(home)
  if (configs.length === 0 && files.length === 0) {
    process.stdout.write(`no trusted project configs in ${trustFile(home)} (dsh trust DIR adds one)\n`)
    return 0
  }
  const line = (config: TrustedConfig, name: string) => `${config.dir}${name === PROJECT_CONFIG ? '' : `  ${name}`}  sha256 ${config.sha256.slice(0, 16)}…  trusted ${config.trustedAt}  ${state(config, name)}\n`
  process.stdout.write(printable([...configs.map((config) => line(config, PROJECT_CONFIG)), ...files.map((file) => line(file, file.file))].join('')))
  return 0
}

/** Whether the directory's file (its dsh.yml, or a hook file) is still the one trusted. */
function state(config: TrustedConfig, name = PROJECT_CONFIG): string {
  const file = join(config.dir, name)
  if (!existsSync(file)) return `(no ${name} there now)`
  try {
    return configDigest(readFileSync(file)) === config.sha256 ? '(in use)' : '(changed since: refused until trusted again)'
  } catch {
    return '(cannot be read now)'
  }
}

function remove(home: string, dir: string): number {
  const removed = untrustProjectConfig(home, dir)
  const names = [...(removed.config ? [join(removed.config.dir, PROJECT_CONFIG)] : []), ...removed.files.map((file) => join(file.dir, file.file))]
  if (names.length === 0) throw new UsageError('USAGE', `dsh trust --remove: ${dir} is not trusted (dsh trust --list shows what is)`)
  process.stdout.write(printable(`dsh: no longer trusted: ${names.join(', ')}\n`))
  return 0
}
