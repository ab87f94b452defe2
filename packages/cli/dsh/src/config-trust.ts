/**
 * The project configs a user trusts. A `dsh.yml` found in the working directory came with
 * whatever was cloned there: it could allow commands, turn the sandbox off, load a plugin
 * (code that runs as the user) or point a model entry at its own server while the key
 * comes from the user's environment. So it is used only once the user has trusted it
 * (`dsh trust`), and a trust is bound to the directory's real path and to the SHA-256 of
 * the file's bytes: a `git pull` (or anything else) that changes the file asks again.
 *
 * The list is a small JSON file in the dsh home, written whole and atomically:
 * `{ "version": 1, "configs": [{ "dir", "sha256", "trustedAt" }] }`.
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

export function configDigest(bytes: Buffer): string {
  return createHash('sha256').update(bytes).digest('hex')
}

export function trustFile(home: string): string {
  return join(home, TRUST_FILE)
}

/** The trusted configs recorded in `home`; none when the file does not exist. A damaged file is one line, exit 2. */
export function readTrustedConfigs(home: string): TrustedConfig[] {
  const file = trustFile(home)
  let text: string
  try {
    text = readFileSync(file, 'utf8')
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return []
    throw new UsageError('USAGE', `dsh: cannot read the trusted configs in ${file}: ${errorMessage(error)}`)
  }
  const damaged = (why: string) => new UsageError('USAGE', `dsh: ${file} is not a list of trusted configs (${why}): fix it or remove it (then \`dsh trust\` again what you trust)`)
  let parsed: unknown
  try {
    parsed = JSON.parse(text)
  } catch (error) {
    throw damaged(errorMessage(error))
  }
  if (!isRecord(parsed) || parsed.version !== 1 || !Array.isArray(parsed.configs)) throw damaged('expected { "version": 1, "configs": [...] }')
  return parsed.configs.map((entry: unknown, index: number) => {
    if (!isRecord(entry) || typeof entry.dir !== 'string' || typeof entry.sha256 !== 'string' || !/^[0-9a-f]{64}$/.test(entry.sha256) || typeof entry.trustedAt !== 'string') {
      throw damaged(`configs[${index}] needs dir, sha256 (64 hex digits) and trustedAt`)
    }
    return { dir: entry.dir, sha256: entry.sha256, trustedAt: entry.trustedAt }
  })
}

/** Replace the list in `home`, atomically: a reader sees the old list or the new one, never part of one. */
function writeTrustedConfigs(home: string, configs: readonly TrustedConfig[]): void {
  const file = trustFile(home)
  mkdirSync(home, { recursive: true, mode: 0o700 })
  // An unpredictable name created exclusively (`wx`): a file or link planted at a guessable
  // temporary name is never written through.
  const temporary = `${file}.${process.pid}.${randomBytes(6).toString('hex')}.tmp`
  try {
    writeFileSync(temporary, `${JSON.stringify({ version: 1, configs }, null, 2)}\n`, { mode: 0o600, flag: 'wx' })
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
 * Trust `dir`'s dsh.yml as it is now: its bytes' SHA-256, under the directory's real path,
 * replacing an earlier trust of the same directory. Returns the record and the bytes.
 */
export function trustProjectConfig(home: string, dir: string, now = new Date()): { record: TrustedConfig; bytes: Buffer } {
  const real = realDirectory(dir)
  const file = join(real, PROJECT_CONFIG)
  let bytes: Buffer
  try {
    bytes = readFileSync(file)
  } catch (error) {
    throw new UsageError('USAGE', `dsh trust: no ${PROJECT_CONFIG} to trust in ${real}: ${errorMessage(error)}`)
  }
  const record: TrustedConfig = { dir: real, sha256: configDigest(bytes), trustedAt: now.toISOString() }
  writeTrustedConfigs(home, [...readTrustedConfigs(home).filter((entry) => entry.dir !== real), record])
  return { record, bytes }
}

/** Forget the trust of `dir` (by its real path); the record removed, or undefined when it was not trusted. */
export function untrustProjectConfig(home: string, dir: string): TrustedConfig | undefined {
  const real = realDirectory(dir)
  const configs = readTrustedConfigs(home)
  const removed = configs.find((entry) => entry.dir === real || entry.dir === resolve(dir))
  if (removed) writeTrustedConfigs(home, configs.filter((entry) => entry !== removed))
  return removed
}
