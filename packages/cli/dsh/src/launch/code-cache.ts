/**
 * A V8 code cache for the bundled CLI, for runtimes without Node's own compile cache
 * (`module.enableCompileCache` arrived in Node 22.1). The bundle is one CommonJS file; it
 * is compiled here with `vm.Script` and the bytecode V8 produced for it last time
 * (`cachedData`), so a start skips parsing and compiling what the last run already did.
 *
 * The cache file is one JSON header line, then V8's bytes:
 *
 *     {"format":"dsh-code-cache/2","sourceBytes":N,"sha256":"…","bytes":M,"modules":[…]}\n<M bytes>
 *
 * V8 checks only the source's length, its own version and its flags, and in release
 * builds it does not checksum the bytes: a damaged file could crash it. So nothing reaches
 * V8 unless the header parses, names this format and this source length, and the bytes
 * are exactly as long as the header says with the SHA-256 it records. Anything else
 * (missing, garbage, truncated, damaged, made for another build) runs the bundle without
 * a cache, and the run writes a fresh one when it exits. The file's name carries the
 * bundle's content hash, so a rebuild never meets an old cache.
 *
 * V8 caches what the writing run compiled, so a cache written by a run that delegated
 * nothing left every later run that composed or used a provider compiling its code (about
 * 40 ms of a run with an ACP child, 35 of one with the provider composed and unused). `modules` lists the bundle's lazily run modules the cached runs
 * loaded (the bundle records them: scripts/bundle.mjs); a run that used the cache and loaded
 * one it lacks writes it again, now with that run's code too (V8 keeps what it restored), so
 * the cache grows to what the user's runs use and is rewritten only when it grows.
 */
import { isAscii } from 'node:buffer'
import { createHash, randomBytes } from 'node:crypto'
import { closeSync, constants, fstatSync, mkdirSync, openSync, readdirSync, readFileSync, readSync, renameSync, statSync, unlinkSync, writeFileSync } from 'node:fs'
import Module, { createRequire } from 'node:module'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { Script } from 'node:vm'

const FORMAT = 'dsh-code-cache/2'
/** The longest header read: far above a real one (its module list is a few KB). */
const MAX_HEADER_BYTES = 64 * 1024

/**
 * What became of the cache: `used` (V8 took it), `missing` (no file), `invalid` (the file
 * failed the checks above), `rejected` (V8 refused it: another Node version or other V8
 * flags), `off` (no cache file was given).
 */
export type CodeCacheStatus = 'used' | 'missing' | 'invalid' | 'rejected' | 'off'

export interface CodeCacheRun {
  status: CodeCacheStatus
  /** What the file exported (`module.exports`). */
  exports: unknown
  /**
   * Write a fresh cache unless this run used one that already covered every module it
   * loaded. Call it late (at exit): V8 then includes every function the run compiled, not
   * only the top level. Never throws: a cache that cannot be written only costs the next
   * start its speed.
   */
  persist(): void
}

/** A cache file's contents: V8's bytes, and the bundle modules the runs that wrote them loaded. */
export interface CodeCache {
  bytes: Buffer
  modules: readonly string[]
}

interface CacheHeader {
  format: string
  sourceBytes: number
  sha256: string
  bytes: number
  modules: string[]
}

function sha256(data: Buffer): string {
  return createHash('sha256').update(data).digest('hex')
}

/** The cache in `cacheFile` if it is intact and made for a source of `sourceBytes`; else why not. */
export function readCodeCache(cacheFile: string, sourceBytes: number): CodeCache | 'missing' | 'invalid' {
  let raw: Buffer | 'invalid'
  try {
    raw = readRegularFile(cacheFile)
  } catch {
    // Absent or unreadable: either way there is nothing to use, and the run writes one.
    return 'missing'
  }
  if (raw === 'invalid') return 'invalid'
  const newline = raw.indexOf(10)
  if (newline < 0 || newline > MAX_HEADER_BYTES) return 'invalid'
  let header: Partial<CacheHeader>
  try {
    header = JSON.parse(raw.subarray(0, newline).toString('utf8')) as Partial<CacheHeader>
  } catch {
    // Not JSON: garbage or another program's file, to be replaced.
    return 'invalid'
  }
  if (header === null || typeof header !== 'object' || header.format !== FORMAT || header.sourceBytes !== sourceBytes) return 'invalid'
  const { modules } = header
  if (!Array.isArray(modules) || !modules.every((name) => typeof name === 'string')) return 'invalid'
  const bytes = raw.subarray(newline + 1)
  if (bytes.length !== header.bytes || bytes.length === 0 || sha256(bytes) !== header.sha256) return 'invalid'
  return { bytes, modules }
}

/** Largest cache file read: far above any real one (a few MB), so a planted huge file is refused unread. */
const MAX_CACHE_BYTES = 64 * 1024 * 1024

/**
 * The contents of `file` if it is a regular file of sane size; `'invalid'` for anything
 * else. Opened without following a symlink and without blocking, then checked on the open
 * descriptor: a FIFO, a device or a link to `/dev/zero` planted at the cache's name must
 * not hang or flood the start. Throws when the file cannot be opened (absent, no access).
 */
function readRegularFile(file: string): Buffer | 'invalid' {
  let fd: number
  try {
    fd = openSync(file, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK)
  } catch (error) {
    // A symlink (ELOOP) is not ours; anything else (ENOENT, EACCES) means there is no cache.
    if ((error as NodeJS.ErrnoException).code === 'ELOOP') return 'invalid'
    throw error
  }
  try {
    const stat = fstatSync(fd)
    if (!stat.isFile() || stat.size > MAX_CACHE_BYTES) return 'invalid'
    const raw = Buffer.allocUnsafe(stat.size)
    let read = 0
    while (read < raw.length) {
      const got = readSync(fd, raw, read, raw.length - read, read)
      if (got === 0) break
      read += got
    }
    return raw.subarray(0, read)
  } finally {
    closeSync(fd)
  }
}

/** Write `bytes` as the cache for a source of `sourceBytes`, with the `modules` its runs loaded, atomically (a reader sees the old file or the new one). */
export function writeCodeCache(cacheFile: string, sourceBytes: number, bytes: Buffer, modules: readonly string[] = []): void {
  const header: CacheHeader = { format: FORMAT, sourceBytes, sha256: sha256(bytes), bytes: bytes.length, modules: [...modules].sort() }
  // Private like the sessions: the cache is code this user's dsh runs.
  mkdirSync(dirname(cacheFile), { recursive: true, mode: 0o700 })
  // An unpredictable name created exclusively (`wx`): a file or link planted at a guessable
  // temporary name is never written through.
  const temporary = `${cacheFile}.${process.pid}.${randomBytes(6).toString('hex')}.tmp`
  try {
    writeFileSync(temporary, Buffer.concat([Buffer.from(`${JSON.stringify(header)}\n`), bytes]), { mode: 0o600, flag: 'wx' })
    renameSync(temporary, cacheFile)
  } catch (error) {
    try {
      unlinkSync(temporary)
    } catch {
      // Never written, or already gone: nothing to clean up.
    }
    throw error
  }
}

/**
 * The `require` the bundle gets. The bundler turned every `import()` into a `require()`
 * (see scripts/bundle.mjs), so it is also given what `import()` takes: a `file:` URL, for
 * a plugin loaded from disk, is required by its path.
 */
function bundleRequire(file: string): NodeJS.Require {
  const base = createRequire(file)
  const require = ((id: string): unknown => base(id.startsWith('file:') ? fileURLToPath(id) : id)) as NodeJS.Require
  return Object.assign(require, { resolve: base.resolve, cache: base.cache, extensions: base.extensions, main: base.main })
}

/**
 * Run the CommonJS file `file` (as `require` would: its own `module`, `exports`, `require`,
 * `__filename`, `__dirname`) with the code cache in `cacheFile` (`undefined`: none). The
 * file must not call `import()`: on Node 20 code restored from a cache cannot.
 */
export function runWithCodeCache(file: string, cacheFile: string | undefined): CodeCacheRun {
  // Read as bytes, then decode: the file's length is the source's byte length for free,
  // where measuring the decoded 1.7 MB string cost about 2 ms of every start. The bundle is
  // ASCII (the build guarantees it), and ASCII decodes as Latin-1 into the same one-byte
  // string without UTF-8's decoding pass; any other file is decoded as UTF-8.
  const bytes = readFileSync(file)
  const sourceBytes = bytes.length
  const source = isAscii(bytes) ? bytes.toString('latin1') : bytes.toString('utf8')
  const found = cacheFile === undefined ? 'off' : readCodeCache(cacheFile, sourceBytes)
  const script = new Script(Module.wrap(source), {
    filename: file,
    ...(typeof found !== 'string' && { cachedData: found.bytes }),
  })
  const status: CodeCacheStatus = typeof found === 'string' ? found : script.cachedDataRejected === true ? 'rejected' : 'used'
  const module = new Module(file)
  module.filename = file
  const wrapper = script.runInThisContext() as (exports: unknown, require: NodeJS.Require, module: Module, filename: string, dirname: string) => void
  wrapper.call(module.exports, module.exports, bundleRequire(file), module, file, dirname(file))
  return {
    status,
    get exports() {
      return module.exports
    },
    persist() {
      if (cacheFile === undefined) return
      // What this run loaded of the bundle's lazily run modules (absent: a file that does not record them).
      const loaded = (module as { dshLoadedModules?: ReadonlySet<string> }).dshLoadedModules ?? new Set<string>()
      const cached = status === 'used' && typeof found !== 'string' ? found.modules : undefined
      if (cached !== undefined && !addsTo(cached, loaded)) return
      try {
        writeCodeCache(cacheFile, sourceBytes, script.createCachedData(), [...new Set([...(cached ?? []), ...loaded])])
      } catch {
        // An unwritable cache directory (read-only home, full disk) must not fail a run that
        // has already done its work: the next start simply compiles again.
      }
    },
  }
}

/** Whether `loaded` holds a module `cached` does not. */
function addsTo(cached: readonly string[], loaded: ReadonlySet<string>): boolean {
  if (loaded.size === 0) return false
  const known = new Set(cached)
  for (const name of loaded) if (!known.has(name)) return true
  return false
}

/**
 * Remove the cache files in `dir` matching `isCacheFile`, except `keep`, that were written
 * more than `olderThanMs` ago: caches of earlier builds. Recent ones may belong to another
 * checkout sharing the directory. Best effort; never throws.
 */
export function pruneCodeCaches(dir: string, keep: string, isCacheFile: (name: string) => boolean, olderThanMs: number, now = Date.now()): void {
  let names: string[]
  try {
    names = readdirSync(dir)
  } catch {
    // No directory: nothing to prune.
    return
  }
  for (const name of names) {
    const file = join(dir, name)
    if (file === keep || !isCacheFile(name)) continue
    try {
      if (now - statSync(file).mtimeMs > olderThanMs) unlinkSync(file)
    } catch {
      // Removed meanwhile by another dsh, or not ours to remove: leave it.
    }
  }
}
