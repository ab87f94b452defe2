/**
 * A V8 code cache for the bundled CLI, for runtimes without Node's own compile cache
 * (`module.enableCompileCache` arrived in Node 22.1). The bundle is one CommonJS file; it
 * is compiled here with `vm.Script` and the bytecode V8 produced for it last time
 * (`cachedData`), so a start skips parsing and compiling what the last run already did.
 *
 * The cache file is one JSON header line, then V8's bytes:
 *
 *     {"format":"dsh-code-cache/1","sourceBytes":N,"sha256":"…","bytes":M}\n<M bytes>
 *
 * V8 checks only the source's length, its own version and its flags, and in release
 * builds it does not checksum the bytes: a damaged file could crash it. So nothing reaches
 * V8 unless the header parses, names this format and this source length, and the bytes
 * are exactly as long as the header says with the SHA-256 it records. Anything else
 * (missing, garbage, truncated, damaged, made for another build) runs the bundle without
 * a cache, and the run writes a fresh one when it exits. The file's name carries the
 * bundle's content hash, so a rebuild never meets an old cache.
 */
import { isAscii } from 'node:buffer'
import { createHash, randomBytes } from 'node:crypto'
import { closeSync, constants, fstatSync, mkdirSync, openSync, readdirSync, readFileSync, readSync, renameSync, statSync, unlinkSync, writeFileSync } from 'node:fs'
import Module, { createRequire } from 'node:module'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { Script } from 'node:vm'

const FORMAT = 'dsh-code-cache/1'

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
   * Write a fresh cache unless this run used one. Call it late (at exit): V8 then includes
   * every function the run compiled, not only the top level. Never throws: a cache that
   * cannot be written only costs the next start its speed.
   */
  persist(): void
}

interface CacheHeader {
  format: string
  sourceBytes: number
  sha256: string
  bytes: number
}

function sha256(data: Buffer): string {
  return createHash('sha256').update(data).digest('hex')
}

/** The V8 bytes in `cacheFile` if it is intact and made for a source of `sourceBytes`; else why not. */
export function readCodeCache(cacheFile: string, sourceBytes: number): Buffer | 'missing' | 'invalid' {
  let raw: Buffer | 'invalid'
  try {
    raw = readRegularFile(cacheFile)
  } catch {
    // Absent or unreadable: either way there is nothing to use, and the run writes one.
    return 'missing'
  }
  if (raw === 'invalid') return 'invalid'
  const newline = raw.indexOf(10)
  if (newline < 0 || newline > 1024) return 'invalid'
  let header: Partial<CacheHeader>
  try {
    header = JSON.parse(raw.subarray(0, newline).toString('utf8')) as Partial<CacheHeader>
  } catch {
    // Not JSON: garbage or another program's file, to be replaced.
    return 'invalid'
  }
  if (header === null || typeof header !== 'object' || header.format !== FORMAT || header.sourceBytes !== sourceBytes) return 'invalid'
  const bytes = raw.subarray(newline + 1)
  if (bytes.length !== header.bytes || bytes.length === 0 || sha256(bytes) !== header.sha256) return 'invalid'
  return bytes
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

/** Write `bytes` as the cache for a source of `sourceBytes`, atomically (a reader sees the old file or the new one). */
export function writeCodeCache(cacheFile: string, sourceBytes: number, bytes: Buffer): void {
  const header: CacheHeader = { format: FORMAT, sourceBytes, sha256: sha256(bytes), bytes: bytes.length }
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
    ...(typeof found !== 'string' && { cachedData: found }),
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
      if (cacheFile === undefined || status === 'used') return
      try {
        writeCodeCache(cacheFile, sourceBytes, script.createCachedData())
      } catch {
        // An unwritable cache directory (read-only home, full disk) must not fail a run that
        // has already done its work: the next start simply compiles again.
      }
    },
  }
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
