/**
 * The code cache of the bundled CLI (src/launch/code-cache.ts): a start uses it, and a
 * cache that is damaged, foreign or unwritable never breaks a run: the run goes on without
 * it and leaves a good one behind.
 */
import { execFileSync } from 'node:child_process'
import { mkdirSync, readdirSync, readFileSync, statSync, symlinkSync, utimesSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { Script } from 'node:vm'
import { describe, expect, it } from 'vitest'
import { readCodeCache, runWithCodeCache, writeCodeCache } from '../src/launch/code-cache.js'
import { dshBundle, runDsh, tempDir } from './cli.js'

const hello = (cache: string) => runDsh(['run', '--model', 'scripted:examples/hello.yml', '--session-dir', tempDir(), '--quiet', 'hello'], { env: { DSH_CODE_CACHE: cache } })

function cacheFileIn(dir: string): string {
  const files = readdirSync(dir).filter((name) => name.endsWith('.v8cache'))
  expect(files).toHaveLength(1)
  return join(dir, files[0])
}

/** V8's bytes of a cache `readCodeCache` found intact; what it said otherwise. */
function bytesOf(found: ReturnType<typeof readCodeCache>): Buffer | string {
  return typeof found === 'string' ? found : found.bytes
}

/** The header's source length, for checking a cache file the way the launcher does. */
function sourceBytesOf(file: string): number {
  const raw = readFileSync(file)
  return (JSON.parse(raw.subarray(0, raw.indexOf(10)).toString('utf8')) as { sourceBytes: number }).sourceBytes
}

describe('the bundled CLI with a code cache', () => {
  it('the first run writes a cache and the next run uses it without rewriting it', async () => {
    const dir = tempDir('dsh-cache-')
    const first = await hello(dir)
    expect(first.code, first.stderr).toBe(0)
    const file = cacheFileIn(dir)
    expect(bytesOf(readCodeCache(file, sourceBytesOf(file)))).toBeInstanceOf(Buffer)
    const written = statSync(file).mtimeMs
    const second = await hello(dir)
    expect(second.code, second.stderr).toBe(0)
    expect(second.stdout).toBe(first.stdout)
    expect(statSync(file).mtimeMs).toBe(written)
  })

  it('a damaged, truncated, foreign or garbage cache file still runs correctly and is replaced by a good one', async () => {
    const dir = tempDir('dsh-cache-')
    expect((await hello(dir)).code).toBe(0)
    const file = cacheFileIn(dir)
    const good = readFileSync(file)
    const sourceBytes = sourceBytesOf(file)
    const header = good.indexOf(10) + 1
    const flipped = Buffer.from(good)
    for (let at = header + 64; at < flipped.length; at += 4096) flipped[at] ^= 0xff
    const damaged: Record<string, Buffer> = {
      'bytes flipped': flipped,
      truncated: good.subarray(0, Math.floor(good.length / 2)),
      garbage: Buffer.from('not a cache at all\n\u0000\u0001\u0002'),
      empty: Buffer.alloc(0),
    }
    for (const [what, bytes] of Object.entries(damaged)) {
      writeFileSync(file, bytes)
      const result = await hello(dir)
      expect(result.code, `${what}: ${result.stderr}`).toBe(0)
      expect(result.stdout, what).toContain('Hello! I am dsh')
      expect(result.stderr, what).toBe('')
      expect(bytesOf(readCodeCache(file, sourceBytes)), what).toBeInstanceOf(Buffer)
    }
    // Intact by its own checksum, but V8's bytes for another script: V8 rejects them.
    const foreignBytes = new Script('6 * 7', { filename: 'other.js' }).createCachedData()
    writeCodeCache(file, sourceBytes, foreignBytes)
    const foreign = await hello(dir)
    expect(foreign.code, foreign.stderr).toBe(0)
    expect(foreign.stdout).toContain('Hello! I am dsh')
    const replaced = bytesOf(readCodeCache(file, sourceBytes))
    expect(replaced).toBeInstanceOf(Buffer)
    expect((replaced as Buffer).equals(foreignBytes)).toBe(false)
  })

  it('a run that loads modules its cache\'s runs did not writes the cache again with their code too; a run that adds none leaves it as it is', async () => {
    const dir = tempDir('dsh-cache-')
    expect((await hello(dir)).code).toBe(0)
    const file = cacheFileIn(dir)
    const first = readCodeCache(file, sourceBytesOf(file))
    if (typeof first === 'string') throw new Error(`the first cache is ${first}`)
    // The acp provider composed (never used): its plugin's modules are ones hello never loads.
    const config = join(tempDir(), 'dsh.yml')
    writeFileSync(config, ['- name: "@dsh/subagent-acp"', '  config: { command: /nonexistent/acp-agent }', ''].join('\n'))
    const withProvider = () => runDsh(['run', '--config', config, '--model', 'scripted:examples/hello.yml', '--session-dir', tempDir(), '--quiet', 'hello'], { env: { DSH_CODE_CACHE: dir } })
    const grown = await withProvider()
    expect(grown.code, grown.stderr).toBe(0)
    const second = readCodeCache(file, sourceBytesOf(file))
    if (typeof second === 'string') throw new Error(`the grown cache is ${second}`)
    expect(second.modules).toEqual(expect.arrayContaining([...first.modules]))
    expect(second.modules.some((name) => name.startsWith('packages/subagent/subagent-acp/'))).toBe(true)
    expect(first.modules.some((name) => name.startsWith('packages/subagent/subagent-acp/'))).toBe(false)
    expect(second.bytes.length).toBeGreaterThan(first.bytes.length)
    // Neither the same run again nor the plain one adds a module: the file stays as it is.
    const written = statSync(file).mtimeMs
    for (const again of [await withProvider(), await hello(dir)]) {
      expect(again.code, again.stderr).toBe(0)
      expect(again.stdout).toContain('Hello! I am dsh')
    }
    expect(statSync(file).mtimeMs).toBe(written)
  })

  it('an unwritable cache directory does not fail the run', async () => {
    const blocker = join(tempDir('dsh-cache-'), 'a-file')
    writeFileSync(blocker, 'a file where the cache directory would be')
    const result = await hello(join(blocker, 'cache'))
    expect(result.code, result.stderr).toBe(0)
    expect(result.stdout).toContain('Hello! I am dsh')
    expect(result.stderr).toBe('')
  })

  it('each command keeps its own cache of this build; only other builds\' old caches are removed', async () => {
    const dir = tempDir('dsh-cache-')
    expect((await hello(dir)).code).toBe(0)
    const [runCache] = readdirSync(dir)
    expect(runCache).toMatch(/^dsh-main-[0-9a-f]{16}-[0-9a-f]{8}-run\.v8cache$/)
    const build = runCache!.slice(0, runCache!.length - 'run.v8cache'.length)
    // This build's cache of another command, written long ago, and another build's.
    const dayAgo = new Date(Date.now() - 2 * 24 * 60 * 60 * 1000)
    writeFileSync(join(dir, `${build}sessions.v8cache`), 'old but ours')
    writeFileSync(join(dir, 'dsh-main-0000000000000000-run.v8cache'), 'another build')
    for (const name of [`${build}sessions.v8cache`, 'dsh-main-0000000000000000-run.v8cache']) utimesSync(join(dir, name), dayAgo, dayAgo)
    const check = await runDsh(['config', 'check'], { env: { DSH_CODE_CACHE: dir } })
    expect(check.code, check.stderr).toBe(0)
    expect(readdirSync(dir).sort()).toEqual([`${build}config.v8cache`, runCache, `${build}sessions.v8cache`].sort())
  })

  it('DSH_CODE_CACHE=off runs without writing a cache', async () => {
    const home = tempDir('dsh-home-')
    const result = await runDsh(['run', '--model', 'scripted:examples/hello.yml', '--session-dir', tempDir(), '--quiet', 'hello'], { env: { DSH_HOME: home, DSH_CODE_CACHE: 'off' } })
    expect(result.code, result.stderr).toBe(0)
    expect(readdirSync(home)).not.toContain('cache')
  })
})

describe('runWithCodeCache', () => {
  function moduleFile(): string {
    const dir = tempDir('dsh-cache-unit-')
    const file = join(dir, 'answer.cjs')
    writeFileSync(file, 'module.exports = { answer: 6 * 7, file: __filename, dir: __dirname }\n')
    return file
  }

  it('reports missing, then used after persist, and runs the file either way', () => {
    const file = moduleFile()
    const cache = join(file, '..', 'cache', 'answer.v8cache')
    const first = runWithCodeCache(file, cache)
    expect(first.status).toBe('missing')
    expect(first.exports).toEqual({ answer: 42, file, dir: join(file, '..') })
    first.persist()
    const second = runWithCodeCache(file, cache)
    expect(second.status).toBe('used')
    expect(second.exports).toMatchObject({ answer: 42 })
  })

  it('persist writes a used cache again only when the run loaded a module the cache does not list, and lists them all', () => {
    const dir = tempDir('dsh-cache-unit-')
    const file = join(dir, 'recording.cjs')
    // As the bundle does (scripts/bundle.mjs): the modules this run loaded, handed to the launcher.
    writeFileSync(file, 'module.dshLoadedModules = new Set(globalThis.dshTestLoaded)\nmodule.exports = 42\n')
    const cache = join(dir, 'cache', 'recording.v8cache')
    const runLoading = (...names: string[]) => {
      ;(globalThis as { dshTestLoaded?: string[] }).dshTestLoaded = names
      const run = runWithCodeCache(file, cache)
      run.persist()
      return run.status
    }
    const listed = () => {
      const found = readCodeCache(cache, statSync(file).size)
      if (typeof found === 'string') throw new Error(`the cache is ${found}`)
      return found.modules
    }
    expect(runLoading('a', 'b')).toBe('missing')
    expect(listed()).toEqual(['a', 'b'])
    const written = readFileSync(cache)
    expect(runLoading('b')).toBe('used')
    expect(runLoading('a', 'b')).toBe('used')
    expect(readFileSync(cache).equals(written)).toBe(true)
    expect(runLoading('c', 'a')).toBe('used')
    expect(listed()).toEqual(['a', 'b', 'c'])
    const grown = readFileSync(cache)
    expect(runLoading('a', 'b', 'c')).toBe('used')
    expect(readFileSync(cache).equals(grown)).toBe(true)
    delete (globalThis as { dshTestLoaded?: string[] }).dshTestLoaded
  })

  it('a file that is not ASCII is decoded as UTF-8, with and without a cache', () => {
    const dir = tempDir('dsh-cache-unit-')
    const file = join(dir, 'greeting.cjs')
    writeFileSync(file, "module.exports = { greeting: 'grüß dich — 你好 🙂' }\n")
    const cache = join(dir, 'cache', 'greeting.v8cache')
    const first = runWithCodeCache(file, cache)
    expect(first.exports).toEqual({ greeting: 'grüß dich — 你好 🙂' })
    first.persist()
    const second = runWithCodeCache(file, cache)
    expect(second.status).toBe('used')
    expect(second.exports).toEqual({ greeting: 'grüß dich — 你好 🙂' })
  })

  it('a FIFO, a link to /dev/zero or a link to a good cache at the cache\'s name is refused unread, never hanging the start', () => {
    const file = moduleFile()
    const dir = join(file, '..', 'cache')
    const good = join(dir, 'good.v8cache')
    runWithCodeCache(file, good).persist()
    expect(runWithCodeCache(file, good).status).toBe('used')
    const fifo = join(dir, 'fifo.v8cache')
    execFileSync('mkfifo', [fifo])
    symlinkSync('/dev/zero', join(dir, 'zero.v8cache'))
    symlinkSync(good, join(dir, 'link.v8cache'))
    for (const name of ['fifo', 'zero', 'link']) {
      const run = runWithCodeCache(file, join(dir, `${name}.v8cache`))
      expect(run.status, name).toBe('invalid')
      expect(run.exports).toMatchObject({ answer: 42 })
    }
  })

  it('writes its cache into a private directory, through a fresh temporary file only', () => {
    const file = moduleFile()
    const dir = join(file, '..', 'private-cache')
    const cache = join(dir, 'answer.v8cache')
    // A link planted where an older build put its temporary file is never written through.
    const victim = join(file, '..', 'victim.txt')
    writeFileSync(victim, 'untouched')
    mkdirSync(dir, { mode: 0o700 })
    symlinkSync(victim, `${cache}.${process.pid}.tmp`)
    runWithCodeCache(file, cache).persist()
    expect(readFileSync(victim, 'utf8')).toBe('untouched')
    expect(runWithCodeCache(file, cache).status).toBe('used')
    const fresh = join(file, '..', 'fresh-cache', 'answer.v8cache')
    runWithCodeCache(file, fresh).persist()
    expect(statSync(join(fresh, '..')).mode & 0o777).toBe(0o700)
  })

  it('refuses a cache whose bytes do not match their checksum, or that was made for a source of another length', () => {
    const file = moduleFile()
    const cache = join(file, '..', 'answer.v8cache')
    runWithCodeCache(file, cache).persist()
    const good = readFileSync(cache)
    const flipped = Buffer.from(good)
    flipped[flipped.length - 1] ^= 0xff
    writeFileSync(cache, flipped)
    expect(runWithCodeCache(file, cache).status).toBe('invalid')
    // A header whose module list is not a list of names is not this format's.
    const newline = good.indexOf(10)
    const header = JSON.parse(good.subarray(0, newline).toString('utf8')) as Record<string, unknown>
    writeFileSync(cache, Buffer.concat([Buffer.from(`${JSON.stringify({ ...header, modules: [1, 2] })}\n`), good.subarray(newline + 1)]))
    expect(runWithCodeCache(file, cache).status).toBe('invalid')
    writeFileSync(cache, good)
    writeFileSync(file, 'module.exports = { answer: 6 * 7, file: __filename, dir: __dirname, more: true }\n')
    const changed = runWithCodeCache(file, cache)
    expect(changed.status).toBe('invalid')
    expect(changed.exports).toMatchObject({ more: true })
  })

  it('reports rejected when V8 refuses bytes that passed the checks, and runs without them', () => {
    const file = moduleFile()
    const cache = join(file, '..', 'answer.v8cache')
    const source = readFileSync(file, 'utf8')
    writeCodeCache(cache, Buffer.byteLength(source), new Script('"another script"').createCachedData())
    const run = runWithCodeCache(file, cache)
    expect(run.status).toBe('rejected')
    expect(run.exports).toMatchObject({ answer: 42 })
  })

  it('persist into a directory that cannot be made does not throw', () => {
    const file = moduleFile()
    mkdirSync(join(file, '..', 'blocked'))
    writeFileSync(join(file, '..', 'blocked', 'file'), '')
    const run = runWithCodeCache(file, join(file, '..', 'blocked', 'file', 'answer.v8cache'))
    expect(run.status).toBe('missing')
    expect(() => run.persist()).not.toThrow()
  })

  it('the bundle is ASCII only, so it loads as a one-byte string, and its cache header records its length in bytes', async () => {
    const bundle = readFileSync(dshBundle)
    expect(bundle.findIndex((byte) => byte > 0x7f)).toBe(-1)
    const dir = tempDir('dsh-cache-')
    expect((await hello(dir)).code).toBe(0)
    expect(sourceBytesOf(cacheFileIn(dir))).toBe(bundle.length)
  })
})
