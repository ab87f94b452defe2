import { accessSync, constants } from 'node:fs'
import { delimiter, join } from 'node:path'
import { childEnvironment, ProcessTree } from '@dsh/process'
import { FileToolError } from './errors.js'
import { grepInWorker } from './grep-fallback.js'
import { FALLBACK_TYPES, type GrepJob, type GrepMode } from './grep-job.js'
import { fileFilter, globToRegExp } from './glob-pattern.js'
import { SKIPPED_DIRECTORIES } from './listing.js'
import { resolveExisting, type Confinement } from './paths.js'
import { bounded } from './render.js'

export interface GrepArgs {
  pattern: string
  path?: string
  glob?: string
  type?: string
  output_mode?: GrepMode
  '-i'?: boolean
  '-A'?: number
  '-B'?: number
  '-C'?: number
}

export interface GrepLimits {
  maxOutputChars: number
  maxLineChars: number
  maxFileBytes: number
  maxWalkEntries: number
  timeoutMs: number
}

/** Which program searches: ripgrep where one is on PATH (and config allows it), else the worker. */
export type GrepEngine = { kind: 'ripgrep'; program: string } | { kind: 'fallback' }

let found: string | null | undefined
/** `rg` on this process's PATH, looked for once. */
export function ripgrepOnPath(env: NodeJS.ProcessEnv = process.env): string | undefined {
  if (found === undefined) {
    found = null
    for (const dir of (env.PATH ?? '').split(delimiter)) {
      if (dir === '') continue
      try {
        accessSync(join(dir, 'rg'), constants.X_OK)
        found = join(dir, 'rg')
        break
      } catch {
        continue
      }
    }
  }
  return found ?? undefined
}

/** `grep`: lines matching a regular expression, under `path` (default the cwd), bounded and in path order. */
export async function grepTool(confinement: Confinement, args: GrepArgs, limits: GrepLimits, engine: GrepEngine, signal: AbortSignal): Promise<string> {
  const { real, name } = await resolveExisting(confinement, args.path ?? '.')
  const mode = args.output_mode ?? 'files_with_matches'
  const context = args['-C'] ?? 0
  const job: GrepJob = {
    regex: args.pattern,
    ignoreCase: args['-i'] === true,
    mode,
    before: args['-B'] ?? context,
    after: args['-A'] ?? context,
    start: real,
    shownPrefix: name === '.' ? '' : `${name}/`,
    globs: args.glob === undefined ? [] : [{ regexp: globSource(args.glob), nameOnly: !args.glob.includes('/') }],
    skip: SKIPPED_DIRECTORIES,
    maxLineChars: limits.maxLineChars,
    maxOutputChars: limits.maxOutputChars,
    maxFileBytes: limits.maxFileBytes,
    maxWalkEntries: limits.maxWalkEntries,
  }
  const notes: string[] = []
  let out: string
  if (engine.kind === 'ripgrep') {
    const result = await runRipgrep(engine.program, job, args, confinement.root, name, limits, signal)
    out = result.out
    if (result.full) notes.push(`output cut at ${limits.maxOutputChars} characters; narrow the pattern, the path or the glob, or use output_mode files_with_matches`)
  } else {
    if (args.type !== undefined) {
      const extensions = FALLBACK_TYPES[args.type]
      if (!extensions) throw new FileToolError('INVALID_ARGS', `type ${args.type} is not one this search knows (${Object.keys(FALLBACK_TYPES).join(', ')}); use glob instead`)
      job.extensions = [...extensions]
    }
    const result = await grepInWorker(job, limits.timeoutMs, signal)
    out = result.out
    if (result.full) notes.push(`output cut at ${limits.maxOutputChars} characters; narrow the pattern, the path or the glob, or use output_mode files_with_matches`)
    if (result.walkStopped) notes.push(`the search stopped after ${limits.maxWalkEntries} entries, so there may be more; narrow the path`)
    if (result.unreadable > 0) notes.push(`${result.unreadable} files or directories could not be read`)
  }
  out = out.replace(/\n$/, '')
  if (out === '') return [`no matches for ${JSON.stringify(args.pattern)} under ${name}`, ...notes.map((note) => `(${note})`)].join('\n')
  return bounded([out, ...notes.map((note) => `(${note})`)].join('\n'), limits.maxOutputChars + 1000, 'narrow the search')
}

function globSource(glob: string): string {
  // Validated (and turned into what the worker tests) here: a bad glob is one clear line.
  fileFilter(glob)
  return globToRegExp(glob.startsWith('/') ? glob.slice(1) : glob).source
}

/** Stop ripgrep's tree and wait until it is gone. */
async function stop(tree: ProcessTree): Promise<void> {
  await tree.reap({ stdinGraceMs: 0, termGraceMs: 500 }).catch(() => {})
}

/**
 * ripgrep through `@dsh/process` (the allow-listed environment, a process group of its own,
 * reaped): asked for the same tree and format as the fallback walks. Its output is read
 * until the bound, then it is stopped; a time bound stops it too.
 */
async function runRipgrep(program: string, job: GrepJob, args: GrepArgs, root: string, name: string, limits: GrepLimits, signal: AbortSignal): Promise<{ out: string; full: boolean }> {
  const argv = ['--no-config', '--color', 'never', '--sort', 'path', '--no-ignore', '--hidden', '--no-messages', '--max-filesize', String(limits.maxFileBytes)]
  for (const dir of SKIPPED_DIRECTORIES) argv.push('--glob', `!${dir}`)
  if (job.ignoreCase) argv.push('--ignore-case')
  if (job.mode === 'files_with_matches') argv.push('--files-with-matches')
  else if (job.mode === 'count') argv.push('--count', '--with-filename')
  else {
    argv.push('--line-number', '--with-filename', '--no-heading', '--max-columns', String(limits.maxLineChars), '--max-columns-preview')
    if (job.before > 0) argv.push('--before-context', String(job.before))
    if (job.after > 0) argv.push('--after-context', String(job.after))
  }
  if (args.glob !== undefined) argv.push('--glob', args.glob)
  if (args.type !== undefined) argv.push('--type', args.type)
  // From the cwd with the name as the path, so ripgrep prints the names the model uses.
  argv.push('--regexp', job.regex, '--', name)
  const tree = new ProcessTree({ command: program, args: argv, cwd: root, env: childEnvironment(process.env) })
  tree.child.stdin!.end()
  let out = ''
  let full = false
  tree.child.stdout!.setEncoding('utf8')
  const readAll = new Promise<void>((resolve) => {
    tree.child.stdout!.on('data', (chunk: string) => {
      if (full) return
      if (out.length + chunk.length > limits.maxOutputChars) {
        full = true
        out += chunk.slice(0, limits.maxOutputChars - out.length)
        out = out.slice(0, out.lastIndexOf('\n') + 1)
        void stop(tree)
        return
      }
      out += chunk
    })
    tree.child.stdout!.on('end', resolve)
    tree.child.stdout!.on('error', () => resolve())
  })
  let timedOut = false
  const timer = setTimeout(() => {
    timedOut = true
    void stop(tree)
  }, limits.timeoutMs)
  const onAbort = () => void stop(tree)
  signal.addEventListener('abort', onAbort, { once: true })
  try {
    await tree.spawned
  } catch (error) {
    clearTimeout(timer)
    signal.removeEventListener('abort', onAbort)
    throw new FileToolError('UNREADABLE', `ripgrep (${program}) could not be started: ${(error as Error).message}`)
  }
  const exit = await tree.exited
  await readAll
  clearTimeout(timer)
  signal.removeEventListener('abort', onAbort)
  await stop(tree)
  if (signal.aborted) throw new FileToolError('TIMED_OUT', 'the search was cancelled')
  if (timedOut) throw new FileToolError('TIMED_OUT', `the search was stopped after ${limits.timeoutMs}ms; search a narrower path`)
  // 0: matches; 1: none; 2: an error (a bad pattern, an unknown type), perhaps beside matches.
  if (!full && exit.code === 2 && out === '') {
    const said = tree.stderr().split('\n').filter((line) => line.trim() !== '')
    throw new FileToolError('BAD_PATTERN', `ripgrep refused the search: ${said.slice(0, 6).join(' ').replace(/\s+/g, ' ') || 'exit code 2'}`)
  }
  // ripgrep names what it finds under `.` as `./x`; the model names it `x`.
  if (name === '.') out = out.replace(/^\.\//gm, '')
  return { out, full }
}
