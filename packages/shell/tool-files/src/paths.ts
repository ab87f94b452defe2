import { lstat, realpath } from 'node:fs/promises'
import { basename, dirname, join, relative, resolve, sep } from 'node:path'
import type { Agent } from '@dsh/agent'
import { FileToolError, fsProblem } from './errors.js'

/**
 * Where one agent's file tools may look and write. Everything is resolved by real path:
 * a path is inside only when the file it names (through every symbolic link) is.
 */
export interface Confinement {
  /** The agent's session cwd, as its header says (a workspace child's worktree). */
  cwd: string
  /** Its real path: what names inside it are relative to. */
  root: string
  /** Real paths of the directories config allows beyond the cwd. */
  allowed: readonly string[]
  /**
   * Under the session header's `sandbox`: the only directories writes may land in, the
   * set bubblewrap makes writable for the same agent's bash commands (`@dsh/tool-bash`'s
   * `sandboxFor`: the cwd). Absent: the cwd and the allowed directories.
   */
  writable?: readonly string[]
  /** What a refusal of a path outside says to do instead (default: the tools' `allowedDirectories`). */
  outsideHint?: string
}

/** The confinement of `agent`'s calls: its session cwd, the configured directories, and its sandbox. */
export async function confinementOf(agent: Agent, allowedDirectories: readonly string[]): Promise<Confinement> {
  const { cwd, sandbox } = agent.session.header
  return confinementOfDirectory(cwd, { allowedDirectories, sandboxed: sandbox !== undefined })
}

/**
 * The confinement of a working directory: `cwd` (resolved by real path), the directories
 * `allowedDirectories` names (relative ones from `cwd`), and, `sandboxed`, writes in `cwd`
 * only. Beside the tools' own, an ACP child's shared workspace (`@dsh/subagent-acp`) is
 * confined by it: the child's working directory alone.
 */
export async function confinementOfDirectory(cwd: string, options: { allowedDirectories?: readonly string[]; sandboxed?: boolean; outsideHint?: string } = {}): Promise<Confinement> {
  let root: string
  try {
    root = await realpath(cwd)
  } catch (error) {
    throw new FileToolError('NOT_FOUND', `the working directory ${cwd} cannot be used: ${fsProblem(error)}`)
  }
  const allowed: string[] = []
  for (const dir of options.allowedDirectories ?? []) {
    // A configured directory that is gone allows nothing; it is not an error of this call.
    try {
      allowed.push(await realpath(resolve(cwd, dir)))
    } catch {
      continue
    }
  }
  return { cwd, root, allowed, ...(options.sandboxed === true && { writable: [root] }), ...(options.outsideHint !== undefined && { outsideHint: options.outsideHint }) }
}

/** Whether `path` (absolute, normalised) is `dir` or below it. */
export function isWithin(path: string, dir: string): boolean {
  if (path === dir) return true
  return path.startsWith(dir.endsWith(sep) ? dir : dir + sep)
}

/** How a path is named back to the model and to permission rules: relative to the cwd when inside it, else absolute. */
export function nameOf(confinement: Confinement, real: string): string {
  if (!isWithin(real, confinement.root)) return real
  return relative(confinement.root, real) || '.'
}

function outside(given: string, confinement: Confinement, how: string): FileToolError {
  const extra = confinement.allowed.length > 0 ? ` or the allowed directories (${confinement.allowed.join(', ')})` : ''
  return new FileToolError(
    'OUTSIDE',
    `${given} is outside the working directory ${confinement.root}${extra}${how}; ${confinement.outsideHint ?? "a file tool reaches only those (the tool's config allowedDirectories lists more)"}`,
  )
}

/** The absolute path `given` names, refused before the disk is touched when it is plainly outside every allowed directory. */
function lexical(confinement: Confinement, given: string): string {
  if (given === '') throw new FileToolError('INVALID_PATH', 'the path is empty')
  if (given.includes('\0')) throw new FileToolError('INVALID_PATH', 'the path holds a NUL character')
  const absolute = resolve(confinement.cwd, given)
  const roots = [confinement.cwd, confinement.root, ...confinement.allowed]
  // Plainly outside (by `..` or an absolute path): refused before anything outside is looked at.
  if (!roots.some((dir) => isWithin(absolute, dir))) throw outside(given, confinement, '')
  return absolute
}

/** A path to read or list: the real path of what it names, and the name it is shown by. */
export async function resolveExisting(confinement: Confinement, given: string): Promise<{ real: string; name: string }> {
  const absolute = lexical(confinement, given)
  let real: string
  try {
    real = await realpath(absolute)
  } catch (error) {
    throw new FileToolError(fsCode(error), `${given}: ${fsProblem(error)}`)
  }
  if (!readableRoots(confinement).some((dir) => isWithin(real, dir))) throw outside(given, confinement, real === absolute ? '' : ` (through a symbolic link, to ${real})`)
  return { real, name: nameOf(confinement, real) }
}

function readableRoots(confinement: Confinement): string[] {
  return [confinement.root, ...confinement.allowed]
}

/**
 * A path to write: the real path the file will have (its parent directory resolved by real
 * path, and the file itself if it exists as a link), checked against where writes may go,
 * and its one name. `given` must be that name: so a permission rule such as `edit(src/**)`
 * sees every file under one name, and `./src/x`, `/abs/cwd/src/x` or a link to `src/`
 * cannot slip past a rule that denies `src/x`.
 */
export async function resolveWritable(confinement: Confinement, given: string): Promise<{ real: string; name: string; exists: boolean }> {
  const target = await resolveWriteTarget(confinement, given)
  if (given !== target.name) {
    throw new FileToolError(
      'NOT_CANONICAL',
      `${given} names the file ${target.name}: give the path as ${JSON.stringify(target.name)} (relative to the working directory, no ./, .. or links; absolute only outside it), so permission rules see one name per file. Nothing was written`,
    )
  }
  return target
}

/**
 * A path to write, by any name: what `resolveWritable` checks but the name, which the
 * caller then uses as the subject of its permission question (an ACP client's absolute
 * `fs/write_text_file` path is asked about by the one name this returns).
 */
export async function resolveWriteTarget(confinement: Confinement, given: string): Promise<{ real: string; name: string; exists: boolean }> {
  const absolute = lexical(confinement, given)
  let real: string
  let exists = false
  try {
    const stat = await lstat(absolute)
    exists = true
    if (stat.isDirectory()) throw new FileToolError('IS_DIRECTORY', `${given} is a directory`)
    real = stat.isSymbolicLink() ? await realpath(absolute) : join(await realParent(absolute), basename(absolute))
  } catch (error) {
    if (error instanceof FileToolError) throw error
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw new FileToolError(fsCode(error), `${given}: ${fsProblem(error)}`)
    if (exists) {
      // A link whose target does not exist: writing would create a file wherever it points.
      throw new FileToolError('OUTSIDE', `${given} is a symbolic link to a file that does not exist; write the file by its own name`)
    }
    real = join(await realParent(absolute), basename(absolute))
  }
  const writable = confinement.writable ?? readableRoots(confinement)
  if (!writable.some((dir) => isWithin(real, dir))) {
    if (confinement.writable && readableRoots(confinement).some((dir) => isWithin(real, dir))) {
      throw new FileToolError('SANDBOXED', `${given} is outside the working directory ${confinement.root}: this agent runs in a sandbox, where only its working directory is writable`)
    }
    throw outside(given, confinement, real === absolute ? '' : ` (through a symbolic link, to ${real})`)
  }
  const name = nameOf(confinement, real)
  if (name.split(sep).includes('.git')) {
    throw new FileToolError('GIT_DIRECTORY', `${given} is inside a .git directory: git's own files (hooks, config) run code, so the file tools never write there; use git commands`)
  }
  return { real, name, exists }
}

/**
 * The real path of `absolute`'s parent directory: its nearest existing ancestor by real path,
 * with the missing directories below it appended (a write creates them).
 */
async function realParent(absolute: string): Promise<string> {
  const missing: string[] = []
  let dir = dirname(absolute)
  for (;;) {
    try {
      return join(await realpath(dir), ...missing.reverse())
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code
      if (code !== 'ENOENT' || dirname(dir) === dir) throw new FileToolError(fsCode(error), `${dir}: ${fsProblem(error)}`)
      missing.push(basename(dir))
      dir = dirname(dir)
    }
  }
}

function fsCode(error: unknown): 'NOT_FOUND' | 'LINK_LOOP' | 'UNREADABLE' {
  const code = (error as NodeJS.ErrnoException).code
  if (code === 'ENOENT' || code === 'ENOTDIR') return 'NOT_FOUND'
  if (code === 'ELOOP') return 'LINK_LOOP'
  return 'UNREADABLE'
}
