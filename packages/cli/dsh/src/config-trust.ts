/**
 * The project configs a user trusts. A `dsh.yml` found in the working directory came with
 * whatever was cloned there: it could allow commands, turn the sandbox off, load a plugin
 * (code that runs as the user) or point a model entry at its own server while the key
 * comes from the user's environment. So it is used only once the user has trusted it
 * (`dsh trust`), and a trust is bound to the directory's real path and to the SHA-256 of
 * the file's bytes: a `git pull` (or anything else) that changes the file asks again.
 *
 * The same trust binds a project's hook files (`.claude/settings.json`,
 * `.claude/settings.local.json`, `.codex/hooks.json`, which `@dsh/hooks` runs when the
 * user's config sets `projectClaudeSettings`/`projectCodexHooks`): `dsh trust` records
 * each that is there, by directory, name and digest, and the hooks plugin is handed them
 * (`projectHookTrust`), so those flags run a project's hooks only in the directories the
 * user trusted, as the files were then.
 *
 * The list is a small JSON file in the dsh home, written whole and atomically:
 * `{ "version": 1, "configs": [{ "dir", "sha256", "trustedAt" }], "files": [{ "dir", "file", "sha256", "trustedAt" }] }`
 * (`files` is new beside `configs`, so a dsh that does not know it still reads its dsh.yml trusts).
 */
import { createHash, randomBytes } from 'node:crypto'
import { mkdirSync, readFileSync, realpathSync, renameSync, unlinkSync, writeFileSync } from 'node:fs'
import { join, resolve } from 'node:path'
import { errorMessage, isRecord } from '@dsh/base'
import { UsageError } from './errors.js'

export const PROJECT_CONFIG = 'dsh.yml'
export const TRUST_FILE = 'trusted-configs.json'

export interface TrustedConfig {
  /** The directory's real path (symbolic links resolved). */
  dir: string
  /** SHA-256 (hex) of the dsh.yml bytes the user trusted. */
  sha256: string
  /** When (ISO 8601). */
  trustedAt: string
}

/**
 * A project's hook files `dsh trust` records beside its dsh.yml, relative to the directory:
 * `@dsh/hooks`' `PROJECT_HOOK_FILES` (kept here so reading the trust list loads nothing of
 * that package; a test holds the two lists equal).
 */
export const PROJECT_HOOK_FILES = ['.claude/settings.json', '.claude/settings.local.json', '.codex/hooks.json'] as const

/** One trusted project hook file. */
export interface TrustedFile extends TrustedConfig {
  /** One of `PROJECT_HOOK_FILES`. */
  file: string
}

export function configDigest(bytes: Buffer): string {
  return createHash('sha256').update(bytes).digest('hex')
}

export function trustFile(home: string): string {
  return join(home, TRUST_FILE)
}

/** The trusted configs recorded in `home`; none when the file does not exist. A damaged file is one line, exit 2. */
export function readTrustedConfigs(home: string): TrustedConfig[] {
  return readTrustList(home).configs
}

/** The trusted project hook files recorded in `home`. */
export function readTrustedFiles(home: string): TrustedFile[] {
  return readTrustList(home).files
}

function readTrustList(home: string): { configs: TrustedConfig[]; files: TrustedFile[] } {
  const file = trustFile(home)
  let text: string
  try {
    text = readFileSync(file, 'utf8')
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return { configs: [], files: [] }
    throw new UsageError('USAGE', `dsh: cannot read the trusted configs in ${file}: ${errorMessage(error)}`)
  }
  const damaged = (why: string) => new UsageError('USAGE', `dsh: ${file} is not a list of trusted configs (${why}): fix it or remove it (then \`dsh trust\` again what you trust)`)
  let parsed: unknown
  try {
    parsed = JSON.parse(text)
  } catch (error) {
    throw damaged(errorMessage(error))
  }
  if (!isRecord(parsed) || parsed.version !== 1 || !Array.isArray(parsed.configs) || (parsed.files !== undefined && !Array.isArray(parsed.files))) throw damaged('expected { "version": 1, "configs": [...], "files": [...] }')
  const record = (entry: unknown, where: string): TrustedConfig => {
    if (!isRecord(entry) || typeof entry.dir !== 'string' || typeof entry.sha256 !== 'string' || !/^[0-9a-f]{64}$/.test(entry.sha256) || typeof entry.trustedAt !== 'string') {
      throw damaged(`${where} needs dir, sha256 (64 hex digits) and trustedAt`)
    }
    return { dir: entry.dir, sha256: entry.sha256, trustedAt: entry.trustedAt }
  }
  const configs = parsed.configs.map((entry: unknown, index: number) => record(entry, `configs[${index}]`))
  const files = ((parsed.files ?? []) as unknown[]).map((entry, index) => {
    const known = record(entry, `files[${index}]`)
    const name = (entry as Record<string, unknown>).file
    if (typeof name !== 'string' || !(PROJECT_HOOK_FILES as readonly string[]).includes(name)) throw damaged(`files[${index}].file must be one of ${PROJECT_HOOK_FILES.join(', ')}`)
    return { ...known, file: name }
  })
  return { configs, files }
}

/** Replace the list in `home`, atomically: a reader sees the old list or the new one, never part of one. */
function writeTrustedConfigs(home: string, configs: readonly TrustedConfig[], files: readonly TrustedFile[]): void {
  const file = trustFile(home)
  mkdirSync(home, { recursive: true, mode: 0o700 })
  // An unpredictable name created exclusively (`wx`): a file or link planted at a guessable
  // temporary name is never written through.
  const temporary = `${file}.${process.pid}.${randomBytes(6).toString('hex')}.tmp`
  try {
    writeFileSync(temporary, `${JSON.stringify({ version: 1, configs, ...(files.length > 0 && { files }) }, null, 2)}\n`, { mode: 0o600, flag: 'wx' })
    renameSync(temporary, file)
  } catch (error) {
    try {
      unlinkSync(temporary)
    } catch {
      // Never written, or already renamed: nothing to clean up.
    }
    throw new UsageError('USAGE', `dsh: cannot write the trusted configs to ${file}: ${errorMessage(error)}`)
  }
}

/** `dir`'s real path, or where it would be when it no longer exists (to remove a trust in a directory that is gone). */
export function realDirectory(dir: string): string {
  try {
    return realpathSync(dir)
  } catch {
    return resolve(dir)
  }
}

/**
 * Trust `dir`'s project files as they are now: its dsh.yml and each of its hook files that
 * is there, each by its bytes' SHA-256 under the directory's real path, replacing every
 * earlier trust of the same directory (a hook file trusted before and gone now is trusted no
 * more). At least one must be there. Returns what was recorded, with the dsh.yml's bytes.
 */
export function trustProjectDirectory(home: string, dir: string, now = new Date()): { config?: { record: TrustedConfig; bytes: Buffer }; files: TrustedFile[] } {
  const real = realDirectory(dir)
  const trustedAt = now.toISOString()
  const config = readIfThere(join(real, PROJECT_CONFIG))
  const files = PROJECT_HOOK_FILES.flatMap((name): TrustedFile[] => {
    const bytes = readIfThere(join(real, name))
    return bytes === undefined ? [] : [{ dir: real, file: name, sha256: configDigest(bytes), trustedAt }]
  })
  if (config === undefined && files.length === 0) throw new UsageError('USAGE', `dsh trust: no ${PROJECT_CONFIG} to trust in ${real}: there is none, nor a project hook file (${PROJECT_HOOK_FILES.join(', ')})`)
  const record = config === undefined ? undefined : { dir: real, sha256: configDigest(config), trustedAt }
  const list = readTrustList(home)
  writeTrustedConfigs(home, [...list.configs.filter((entry) => entry.dir !== real), ...(record ? [record] : [])], [...list.files.filter((entry) => entry.dir !== real), ...files])
  return { ...(record && config && { config: { record, bytes: config } }), files }
}

/** A file's bytes, or undefined when there is none; any other failure is one line. */
function readIfThere(file: string): Buffer | undefined {
  try {
    return readFileSync(file)
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined
    throw new UsageError('USAGE', `dsh trust: cannot read ${file}: ${errorMessage(error)}`)
  }
}

/** Forget the trust of `dir` (by its real path), its dsh.yml's and its hook files'; the records removed (none: it was not trusted). */
export function untrustProjectConfig(home: string, dir: string): { config?: TrustedConfig; files: TrustedFile[] } {
  const real = realDirectory(dir)
  const list = readTrustList(home)
  const named = (entry: TrustedConfig) => entry.dir === real || entry.dir === resolve(dir)
  const config = list.configs.find(named)
  const files = list.files.filter(named)
  if (config || files.length > 0) writeTrustedConfigs(home, list.configs.filter((entry) => !named(entry)), list.files.filter((entry) => !named(entry)))
  return { ...(config && { config }), files }
}

/**
 * The project hook files trusted in `cwd` (by its real path), by absolute path to their
 * digest, for the hooks plugin's `trustedProjectFiles`. A damaged list is one line, exit 2.
 */
export function projectHookTrust(home: string, cwd: string): Record<string, string> {
  const real = realDirectory(cwd)
  return Object.fromEntries(readTrustedFiles(home).filter((entry) => entry.dir === real).map((entry) => [join(real, entry.file), entry.sha256]))
}
