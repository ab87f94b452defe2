// @ts-check
/**
 * Bundles the CLI into dist/bundle/ from what `tsc -b` emitted:
 *
 *   dsh-main.cjs   the CLI and every @dsh package it composes, with the small libraries
 *                  they use (Cordis, schemastery, yaml, ajv, the ACP SDK), as one CommonJS
 *                  file. Each module inside runs only when first imported: a plugin that
 *                  is not composed costs its bytes on disk, not its start-up.
 *   dsh.cjs        the executable (`bin`): runs dsh-main.cjs through a code cache.
 *   dsh-otel.cjs   OpenTelemetry, as `@dsh/tracing` uses it (its `otel.js`): required
 *                  by the bundle only when tracing runs, so with tracing off no start reads
 *                  or compiles a byte of it.
 *
 * The SDKs of optional providers stay outside (EXTERNAL below) and are required from
 * node_modules when a composition uses them.
 *
 * Usage: node scripts/bundle.mjs (from anywhere; `npm run build` runs it after tsc).
 */
import { createHash } from 'node:crypto'
import { chmodSync, existsSync, readFileSync, writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { dirname, join, relative, sep } from 'node:path'
import { fileURLToPath } from 'node:url'
import * as esbuild from 'esbuild'

const packageDir = join(dirname(fileURLToPath(import.meta.url)), '..')
const outDir = join(packageDir, 'dist', 'bundle')
const main = join(outDir, 'dsh-main.cjs')
const launcher = join(outDir, 'dsh.cjs')
const { version } = JSON.parse(readFileSync(join(packageDir, 'package.json'), 'utf8'))

/**
 * Packages required from node_modules at run time instead of bundled: large SDKs only an
 * optional provider or verb uses (OpenAI-compatible models, A2A, Claude Code, the queue's
 * BullMQ and ioredis), and the Claude Agent SDK, which locates files relative to itself.
 * Those a default install brings are dependencies of @dsh/cli, so they resolve from the
 * bundle wherever npm installs it. Code in the bundle that never runs is not free: every
 * start reads and decodes it and V8 takes its source (BullMQ with its libraries was 1.5 of
 * the 3.45 MB: about 3 ms of every start). ioredis is also required, on first use, by
 * `@dsh/subagent-queue` through `createRequire` from its own place (its `redis.ts`), which
 * this plugin's check never sees: it resolves as that package's own import would.
 */
const EXTERNAL = ['openai', '@a2a-js/sdk', 'express', '@anthropic-ai/claude-agent-sdk', '@anthropic-ai/sdk', '@modelcontextprotocol/sdk', 'bullmq', 'ioredis']

const isExternal = (specifier) => EXTERNAL.some((name) => specifier === name || specifier.startsWith(`${name}/`))

/** esbuild: resolve externals from the bundle's directory, and refuse to build if that finds another copy than the importer would. */
const externals = {
  name: 'dsh-externals',
  /** @param {esbuild.PluginBuild} build */
  setup(build) {
    const fromBundle = createRequire(join(outDir, 'resolve-anchor.cjs'))
    build.onResolve({ filter: /^[@a-z]/ }, (args) => {
      if (!isExternal(args.path)) return undefined
      let wanted
      let found
      try {
        wanted = createRequire(args.importer).resolve(args.path)
        found = fromBundle.resolve(args.path)
      } catch (error) {
        return { errors: [{ text: `${args.path} (imported by ${relative(packageDir, args.importer)}) must be resolvable from ${relative(packageDir, outDir)}: ${error instanceof Error ? error.message : String(error)}` }] }
      }
      if (wanted !== found) {
        return { errors: [{ text: `${args.path}: the bundle would load ${found} but ${relative(packageDir, args.importer)} uses ${wanted}; make them one installed copy (npm dedupe) or bundle it` }] }
      }
      return { path: args.path, external: true }
    })
  },
}

/**
 * esbuild: give every module its own `import.meta.url` (esbuild has none in CommonJS
 * output): the URL of its original file where it is installed when the bundle runs, so
 * `createRequire(import.meta.url)('../package.json')` reads the same file as unbundled.
 *
 * A file of this package is found relative to the bundle (the two ship together). A file
 * of another package is found through that package, resolved by name from the bundle on
 * first use: where npm puts `@dsh/a2a-server` (beside `@dsh/cli`, inside it, or in a
 * global prefix) is decided at install time, so no path between two packages may be
 * baked in.
 */
const importMetaUrl = {
  name: 'dsh-import-meta-url',
  /** @param {esbuild.PluginBuild} build */
  setup(build) {
    build.onLoad({ filter: /\.(c|m)?js$/ }, (args) => {
      const contents = readFileSync(args.path, 'utf8')
      if (!contents.includes('import.meta')) return undefined
      const owner = owningPackage(args.path)
      const url = owner.dir === packageDir
        ? `__dshFileUrl(${JSON.stringify(relative(outDir, args.path).split(sep).join('/'))})`
        : `__dshPackageFileUrl(${JSON.stringify(owner.name)}, ${JSON.stringify(relative(owner.dir, args.path).split(sep).join('/'))})`
      return { contents: contents.replaceAll('import.meta.url', url), loader: 'js' }
    })
  },
}

/** The nearest enclosing package of `file` with a name: its directory and name. */
function owningPackage(file) {
  for (let dir = dirname(file); dir !== dirname(dir); dir = dirname(dir)) {
    const manifest = join(dir, 'package.json')
    if (!existsSync(manifest)) continue
    const { name } = JSON.parse(readFileSync(manifest, 'utf8'))
    if (typeof name === 'string') return { dir, name }
  }
  throw new Error(`${file} is in no named package; the bundle cannot say where it is installed`)
}

const tracingDist = join(dirname(createRequire(join(packageDir, 'package.json')).resolve('@dsh/tracing/package.json')), 'dist')
const otelFile = join(outDir, 'dsh-otel.cjs')

/** esbuild: `@dsh/tracing`'s `./otel.js` is the side bundle beside the main one, required when first used. */
const otelSideBundle = {
  name: 'dsh-otel-side-bundle',
  /** @param {esbuild.PluginBuild} build */
  setup(build) {
    build.onResolve({ filter: /^\.\/otel\.js$/ }, (args) => (dirname(args.importer) === tracingDist ? { path: './dsh-otel.cjs', external: true } : undefined))
  },
}

const mainResult = await esbuild.build({
  entryPoints: [join(packageDir, 'dist', 'main.js')],
  outfile: main,
  bundle: true,
  platform: 'node',
  target: 'node20',
  format: 'cjs',
  // Non-ASCII characters escaped: an all-ASCII file decodes into a one-byte string (half
  // the memory of a two-byte one, read about 0.5 ms faster at every start).
  charset: 'ascii',
  legalComments: 'none',
  // Without comments and layout the file is about 30% smaller, which every start reads,
  // copies and scans (about 1.3 ms of `dsh run`). Names are kept (no identifier
  // minification), so a stack still names its functions; its positions point into this file.
  minifyWhitespace: true,
  logLevel: 'warning',
  plugins: [externals, otelSideBundle, importMetaUrl],
  // The version is written in, so no start reads package.json for it (src/version.ts).
  define: { DSH_CLI_VERSION: JSON.stringify(version) },
  // Every import() becomes a require(). Code that V8 restores from a code cache cannot call
  // import() on Node 20 (it fails with "A dynamic import callback was not specified"), so
  // the bundle must not contain one; ESM on disk (an ESM-only SDK, a user's plugin) loads
  // through require(esm), which Node has from 20.19.
  supported: { 'dynamic-import': false },
  banner: { js: '/* The bundled dsh CLI: started by dsh.cjs beside it. Built by packages/cli/dsh/scripts/bundle.mjs; do not edit. */' },
  // Declarations (hoisted) after the code, so that the bundle's "use strict" stays its first statement.
  footer: { js: readFileSync(join(packageDir, 'scripts', 'bundle-footer.cjs'), 'utf8').replaceAll('__dshVersion', JSON.stringify(version)) },
})
if (mainResult.errors.length > 0) process.exit(1)

const otelResult = await esbuild.build({
  entryPoints: [join(tracingDist, 'otel.js')],
  outfile: otelFile,
  bundle: true,
  platform: 'node',
  target: 'node20',
  format: 'cjs',
  charset: 'ascii',
  legalComments: 'none',
  minifyWhitespace: true,
  logLevel: 'warning',
  plugins: [externals],
  supported: { 'dynamic-import': false },
  banner: { js: '/* OpenTelemetry for the bundled dsh CLI, required by dsh-main.cjs when tracing runs. Built by packages/cli/dsh/scripts/bundle.mjs; do not edit. */' },
})
if (otelResult.errors.length > 0) process.exit(1)

// The entry's `#!` line came along; the launcher is the executable, so make it a comment
// (the same length, so columns in stack traces stay put).
let bundled = readFileSync(main, 'utf8')
if (bundled.startsWith('#!')) bundled = `//${bundled.slice(2)}`
bundled = recordingLoadedModules(bundled)
writeFileSync(main, bundled)
warnUnlessAscii(bundled)
const mainSha256 = createHash('sha256').update(readFileSync(main)).digest('hex')

await esbuild.build({
  entryPoints: [join(packageDir, 'dist', 'launch', 'launcher.js')],
  outfile: launcher,
  bundle: true,
  platform: 'node',
  target: 'node20',
  format: 'cjs',
  logLevel: 'warning',
  define: { DSH_MAIN_SHA256: JSON.stringify(mainSha256) },
})
chmodSync(launcher, 0o755)

/**
 * Make the bundle record which of its lazily run modules (those esbuild wraps in `__esm` and
 * `__commonJS`: plugins, providers, their SDKs) ran, in a set it hands its launcher as
 * `module.dshLoadedModules`. The launcher's code cache (src/launch/code-cache.ts) holds what
 * the run that wrote it compiled; a later run that loaded a module none of the cached runs
 * did writes it again, so the cache grows to cover what the user's runs use. Recording is a
 * `Set.add` per module initialisation. esbuild's helpers are matched exactly (its version is
 * pinned): a helper that changed fails the build here rather than leave a cache that never grows.
 */
function recordingLoadedModules(text) {
  // The file's own directive (after the banner's comment lines): modules inside have theirs too.
  const directive = '\n"use strict";'
  if (!text.startsWith('//') || !text.includes(directive) || text.indexOf('"use strict"') !== text.indexOf(directive) + 1) {
    throw new Error('scripts/bundle.mjs: the bundle does not open with comment lines and then its "use strict" directive; update recordingLoadedModules for the esbuild in use')
  }
  let rewritten = text.replace(directive, `${directive}var __dshLoaded=new Set;module.dshLoadedModules=__dshLoaded;`)
  const helpers = [
    ['var __esm=(fn,res,err)=>function __init(){', 'var __esm=(fn,res,err,name=__getOwnPropNames(fn)[0])=>function __init(){__dshLoaded.add(name);'],
    ['var __commonJS=(cb,mod)=>function __require(){', 'var __commonJS=(cb,mod,name=__getOwnPropNames(cb)[0])=>function __require(){__dshLoaded.add(name);'],
  ]
  for (const [from, to] of helpers) {
    if (rewritten.split(from).length !== 2) throw new Error(`scripts/bundle.mjs: esbuild's output no longer has ${JSON.stringify(from)} exactly once; update recordingLoadedModules for the esbuild in use`)
    rewritten = rewritten.replace(from, to)
  }
  return rewritten
}

/**
 * Say so when the bundle is not all ASCII. The launcher holds an ASCII file as a one-byte
 * string (half the memory, a faster start); any other file still runs, decoded as UTF-8.
 * Nothing is rewritten here: with comments gone, a line that looks like one may be inside
 * a template literal or a pattern, which esbuild's `ascii` charset leaves as written in
 * some cases (tagged templates, regular expression literals), and changing it would change
 * what the program does.
 */
function warnUnlessAscii(text) {
  const at = text.search(/[^\x00-\x7f]/u)
  if (at < 0) return
  const line = text.slice(0, at).split('\n').length
  console.warn(`${relative(packageDir, main)}:${line}: a non-ASCII character (${JSON.stringify(text.slice(Math.max(0, at - 40), at + 40))}); the bundle still works, but starts a little slower decoded as UTF-8`)
}
