/**
 * The release as a user gets it: every workspace packed with `npm pack`, installed with npm
 * into directories outside the repository (so nothing resolves into its node_modules), with
 * third-party packages from npm's cache only: tests never reach the registry, so
 * `scripts/warm-npm-cache.mjs` (run by `.ci/run` after `npm ci`) puts them there first.
 * Each step that fails says which one it was.
 */
import { spawn } from 'node:child_process'
import { cpSync, existsSync, lstatSync, mkdirSync, readdirSync, writeFileSync } from 'node:fs'
import { delimiter, dirname, join } from 'node:path'
import { repoRoot } from './cli.js'

export interface Ran {
  code: number | null
  stdout: string
  stderr: string
}

/**
 * The environment of everything started here: without the `npm_*` variables of the `npm
 * test` that runs us (they would point a nested npm at the repository), without model
 * keys or `DSH_*` settings (the tests' shared code cache among them: an installed dsh keeps
 * its own, as a user's does), with this Node first on PATH and no folder of the repository.
 */
export function cleanEnv(extra: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {}
  for (const [key, value] of Object.entries(process.env)) {
    if (/^(npm|DSH)_/i.test(key) || key === 'NODE_PATH' || key === 'INIT_CWD' || key === 'DEEPSEEK_API_KEY' || key === 'OPENAI_API_KEY') continue
    env[key] = value
  }
  // `npm test` puts the repository's node_modules/.bin (with its own dsh) on PATH: not here.
  env.PATH = [dirname(process.execPath), ...(env.PATH ?? '').split(delimiter).filter((dir) => dir !== '' && !dir.startsWith(repoRoot))].join(delimiter)
  return { ...env, ...extra }
}

/** Run a command to its end; never rejects for a non-zero exit (the caller asserts on it). */
export function run(command: string, args: string[], options: { cwd: string; env?: NodeJS.ProcessEnv; timeoutMs?: number; input?: string }): Promise<Ran> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { cwd: options.cwd, env: options.env ?? cleanEnv(), stdio: [options.input === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'] })
    if (options.input !== undefined) child.stdin!.end(options.input)
    let stdout = ''
    let stderr = ''
    child.stdout!.on('data', (chunk: Buffer) => (stdout += chunk))
    child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk))
    const limit = options.timeoutMs ?? 60_000
    const timer = setTimeout(() => {
      child.kill('SIGKILL')
      reject(new Error(`${command} ${args.join(' ')} did not finish within ${limit} ms\nstdout: ${stdout}\nstderr: ${stderr}`))
    }, limit)
    child.on('error', (error) => {
      clearTimeout(timer)
      reject(error)
    })
    child.on('close', (code) => {
      clearTimeout(timer)
      resolve({ code, stdout, stderr })
    })
  })
}

/** `run`, failing with the step's name and the command's output unless it exits 0. */
export async function step(name: string, command: string, args: string[], options: Parameters<typeof run>[2]): Promise<Ran> {
  const result = await run(command, args, options)
  if (result.code !== 0) throw new Error(`step "${name}" failed (exit ${result.code}): ${command} ${args.join(' ')}\n${result.stderr.slice(-4000)}${result.stdout.slice(-2000)}`)
  return result
}

/** The flags every install here shares: npm's cache only (never the registry), no audit or funding requests. */
const OFFLINE_INSTALL_FLAGS = ['--no-audit', '--no-fund', '--offline', '--loglevel=error']

/** What to do when an offline install misses a package in npm's cache. */
const WARM_THE_CACHE = 'npm\'s cache lacks a package this install needs (tests never reach the registry): run `node scripts/warm-npm-cache.mjs` once (`.ci/run` does after `npm ci`)'

/** npm install (or any npm command) offline; fails naming the step, and the fix when the cache misses a package. */
export async function npm(name: string, args: string[], cwd: string, timeoutMs = 300_000): Promise<Ran> {
  try {
    return await step(name, 'npm', [...args, ...OFFLINE_INSTALL_FLAGS], { cwd, timeoutMs })
  } catch (error) {
    if (error instanceof Error && error.message.includes('ENOTCACHED')) error.message = `${WARM_THE_CACHE}\n${error.message}`
    throw error
  }
}

/**
 * Remove `dir` without holding up the suite: `rm -rf` in a process group of its own, waited
 * for at most `waitMs`; a tree still being removed then (a loaded machine deleting a gigabyte)
 * is left to finish on its own, and a failure is reported, never thrown.
 */
export function removeInBackground(dir: string, waitMs: number): Promise<void> {
  return new Promise((resolve) => {
    const rm = spawn('rm', ['-rf', '--', dir], { detached: true, stdio: 'ignore' })
    const timer = setTimeout(() => {
      console.warn(`${dir}: still being removed after ${waitMs} ms; left to finish in the background`)
      rm.unref()
      resolve()
    }, waitMs)
    const done = (why?: string) => {
      clearTimeout(timer)
      if (why !== undefined) console.warn(`${dir}: not removed (${why})`)
      resolve()
    }
    rm.on('error', (error) => done(error.message))
    rm.on('exit', (code) => done(code === 0 ? undefined : `rm exited ${code}`))
  })
}

/** Pack every workspace into `into`; the tarballs' paths, one per workspace. */
export async function packWorkspaces(into: string): Promise<string[]> {
  mkdirSync(into, { recursive: true })
  const { stdout } = await step('npm pack --workspaces', 'npm', ['pack', '--workspaces', '--pack-destination', into, '--json', '--loglevel=error'], { cwd: repoRoot, timeoutMs: 120_000 })
  return (JSON.parse(stdout) as { filename: string }[]).map((pack) => join(into, pack.filename))
}

/** An empty project at `dir`, as `npm init` would leave it. */
export function emptyProject(dir: string): string {
  mkdirSync(dir, { recursive: true })
  writeFileSync(join(dir, 'package.json'), `${JSON.stringify({ name: 'dsh-install-check', version: '1.0.0', private: true }, null, 2)}\n`)
  return dir
}

/** Copy `examples/embed` to `dir` as a project of its own (without anything a local try left there), its tarballs in `packs/`. */
export function embedProject(dir: string, tarballs: readonly string[]): string {
  const source = join(repoRoot, 'examples', 'embed')
  cpSync(source, dir, { recursive: true, filter: (path) => !/[/\\](node_modules|dist|packs|package-lock\.json)$/.test(path) })
  mkdirSync(join(dir, 'packs'))
  for (const tarball of tarballs) cpSync(tarball, join(dir, 'packs', tarball.split(/[/\\]/).pop()!))
  return dir
}

/** Bytes of every file under `dir` (links not followed), and what they take on disk (512-byte blocks, as du counts). */
export function treeSize(dir: string): { bytes: number; onDisk: number } {
  let bytes = 0
  let onDisk = 0
  const stack = [dir]
  while (stack.length > 0) {
    const current = stack.pop()!
    for (const entry of readdirSync(current, { withFileTypes: true })) {
      const path = join(current, entry.name)
      const stat = lstatSync(path)
      onDisk += stat.blocks * 512
      if (entry.isDirectory()) stack.push(path)
      else bytes += stat.size
    }
  }
  return { bytes, onDisk }
}

export const MB = 1024 * 1024

/** The name of every package installed under the node_modules folder `modules`, nested ones too (one entry per installed copy). */
export function installedPackages(modules: string): string[] {
  const names: string[] = []
  const visit = (dir: string) => {
    if (!existsSync(dir)) return
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      if (!entry.isDirectory() || entry.name.startsWith('.')) continue
      const scoped = entry.name.startsWith('@')
      for (const name of scoped ? readdirSync(join(dir, entry.name)) : [entry.name]) {
        const path = scoped ? join(dir, entry.name, name) : join(dir, name)
        if (!existsSync(join(path, 'package.json'))) continue
        names.push(scoped ? `${entry.name}/${name}` : name)
        visit(join(path, 'node_modules'))
      }
    }
  }
  visit(modules)
  return names
}
