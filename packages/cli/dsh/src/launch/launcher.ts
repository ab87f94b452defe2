#!/usr/bin/env node
/**
 * The `dsh` executable: starts the bundled CLI (`dsh-main.cjs` beside this file) with a
 * cache of its compiled code. Both files are written by `scripts/bundle.mjs`; this one is
 * only meaningful there (it reads the bundle's hash, which the build fills in).
 *
 * - Node ≥ 22.1: Node's own compile cache (`module.enableCompileCache`), then `require`.
 * - Older Node (20): our V8 code cache (`code-cache.ts`), one file per command, keyed by
 *   the bundle's hash and its path.
 *
 * Where: `$DSH_CODE_CACHE` when set (`off` disables the cache), else `$DSH_HOME/cache`
 * (`~/.dsh/cache`). A cache that cannot be read or written never fails a run.
 */
import { createHash } from 'node:crypto'
import Module from 'node:module'
import { join } from 'node:path'
import { dshHome } from '../config-file.js'
import { pruneCodeCaches, runWithCodeCache } from './code-cache.js'

/** The SHA-256 of `dsh-main.cjs`, filled in by the bundler (`define`). */
declare const DSH_MAIN_SHA256: string

const CACHE_PREFIX = 'dsh-main-'
const CACHE_SUFFIX = '.v8cache'
/** Caches of other builds older than this are removed when a new one is written. */
const STALE_CACHE_MS = 24 * 60 * 60 * 1000

function cacheDir(env: NodeJS.ProcessEnv): string | undefined {
  const chosen = env.DSH_CODE_CACHE
  if (chosen === 'off') return undefined
  return chosen ? chosen : join(dshHome(env), 'cache')
}

function launch(): void {
  const main = join(__dirname, 'dsh-main.cjs')
  const dir = cacheDir(process.env)
  const enableCompileCache = (Module as { enableCompileCache?: (directory?: string) => unknown }).enableCompileCache
  if (enableCompileCache) {
    if (dir !== undefined) {
      try {
        enableCompileCache(join(dir, 'node-compile-cache'))
      } catch {
        // Node reports a directory it cannot use in its return value; a throw is just as
        // harmless: the CLI runs without a cache.
      }
    }
    require(main)
    return
  }
  // The bundle's place is part of the name: two installs of one build (a global and a local
  // one) share a cache directory, and V8 keeps the writer's file name in what it caches.
  const build = `${CACHE_PREFIX}${DSH_MAIN_SHA256.slice(0, 16)}-${createHash('sha256').update(main).digest('hex').slice(0, 8)}-`
  const cacheFile = dir === undefined ? undefined : join(dir, `${build}${cachedCommand(process.argv[2])}${CACHE_SUFFIX}`)
  const run = runWithCodeCache(main, cacheFile)
  if (cacheFile === undefined || dir === undefined) return
  process.once('exit', () => {
    // Writes the cache when there was none, or when this run loaded modules the cache's runs did not.
    run.persist()
    if (run.status === 'used') return
    // Only other builds' caches (and leftover temporary files) go: this build's caches of
    // other commands are still in use, however old.
    pruneCodeCaches(dir, cacheFile, (name) => name.startsWith(CACHE_PREFIX) && (name.endsWith('.tmp') || (name.endsWith(CACHE_SUFFIX) && !name.startsWith(build))), STALE_CACHE_MS)
  })
}

/** The commands with a cache of their own; anything else shares one. */
const CACHED_COMMANDS = new Set(['run', 'acp', 'a2a', 'demo', 'sessions', 'config'])

/**
 * Which cache a command uses. V8's cache holds what the run that wrote it compiled, and a
 * used cache is never rewritten: with one cache per build, whichever command ran first
 * (usually `dsh run`) decided it, and a `dsh acp` child compiled its protocol code on every
 * start. So each command keeps its own.
 */
function cachedCommand(command: string | undefined): string {
  return command !== undefined && CACHED_COMMANDS.has(command) ? command : 'other'
}

launch()
