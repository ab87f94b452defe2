#!/usr/bin/env node
/**
 * Checks that `npm install` leaves the committed package-lock.json alone: npm is run with
 * `--package-lock-only` on a copy of the manifests and the lockfile (the repository's own
 * files and node_modules are never touched), and the lockfile it writes must be the one
 * given, byte for byte. A lockfile edited by hand (a dependency added to a workspace's
 * entry out of npm's order), or a manifest changed without `npm install`, fails here
 * instead of showing up as a diff in the next user's clone.
 *
 * Usage: node scripts/lockfile-check.mjs [--root DIR]   (DIR: a checkout, default this one)
 * Exits 0 when npm leaves the lockfile as it is; 1 naming the entries npm rewrites and
 * what to do; 2 when npm itself fails (its last lines, e.g. a package not in npm's cache).
 * npm prefers its cache (`--prefer-offline`): a lockfile that is current needs no registry.
 */
import { spawnSync } from 'node:child_process'
import { cpSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

const NPM_LIMIT_MS = 180_000

const args = process.argv.slice(2)
const rootAt = args.indexOf('--root')
const root = rootAt >= 0 ? args[rootAt + 1] : join(dirname(fileURLToPath(import.meta.url)), '..')
if (rootAt >= 0 && !root) {
  console.error('usage: node scripts/lockfile-check.mjs [--root DIR]')
  process.exit(2)
}

/** The manifests npm reads for the lockfile: the root's and every workspace's (`packages/<group>/<name>`, as the root's `workspaces` says). */
function manifests(dir) {
  const workspaces = readdirSync(join(dir, 'packages')).flatMap((group) => readdirSync(join(dir, 'packages', group)).map((name) => join('packages', group, name, 'package.json')))
  return ['package.json', ...workspaces.filter((path) => existsSync(join(dir, path)))]
}

/** The entries of `packages` whose JSON differs between two lockfiles, by key. */
function changedEntries(before, after) {
  const keys = new Set([...Object.keys(before.packages ?? {}), ...Object.keys(after.packages ?? {})])
  return [...keys].filter((key) => JSON.stringify(before.packages?.[key]) !== JSON.stringify(after.packages?.[key])).map((key) => key || '(the root)')
}

const scratch = mkdtempSync(join(tmpdir(), 'dsh-lockfile-check-'))
try {
  for (const path of [...manifests(root), 'package-lock.json']) cpSync(join(root, path), join(scratch, path))
  const npm = spawnSync('npm', ['install', '--package-lock-only', '--ignore-scripts', '--prefer-offline', '--no-audit', '--no-fund', '--loglevel=error'], { cwd: scratch, encoding: 'utf8', timeout: NPM_LIMIT_MS })
  if (npm.error || npm.status !== 0) {
    const why = npm.error ? npm.error.message : `exit ${npm.status}`
    console.error(`lockfile-check: npm install --package-lock-only failed (${why}):\n${(npm.stderr ?? '').trim().split('\n').slice(-8).join('\n')}`)
    process.exit(2)
  }
  const committed = readFileSync(join(root, 'package-lock.json'), 'utf8')
  const written = readFileSync(join(scratch, 'package-lock.json'), 'utf8')
  if (written !== committed) {
    const entries = changedEntries(JSON.parse(committed), JSON.parse(written))
    const named = entries.length ? `${entries.slice(0, 5).join(', ')}${entries.length > 5 ? ` and ${entries.length - 5} more` : ''}` : 'its layout'
    console.error(`lockfile-check: npm install rewrites package-lock.json (${named}); run npm install and commit package-lock.json as npm writes it, never edited by hand`)
    process.exit(1)
  }
  console.log('lockfile-check: npm install leaves package-lock.json as it is')
} finally {
  rmSync(scratch, { recursive: true, force: true, maxRetries: 3 })
}
