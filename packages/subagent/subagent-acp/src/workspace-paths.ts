/**
 * Where a shared-workspace child may touch: its working directory and what is below it,
 * judged on real paths. A path is resolved lexically first (`..` removed), then its
 * deepest existing ancestor is resolved through every symlink (`realpath`): the result
 * must be the root or below it, or the request is refused. What is then opened is that
 * real path (plus the components that do not exist yet), never the path as asked, so a
 * symlink inside the root that points out is refused rather than followed.
 *
 * The check and the open are two steps: a command the child runs meanwhile could swap a
 * directory for a symlink between them. The final component is opened with `O_NOFOLLOW`,
 * which closes that window for the file itself; a swapped parent directory is not caught
 * (a sandbox is the confinement for commands; this is the confinement for fs requests).
 */
import { constants } from 'node:fs'
import { lstat, mkdir, open, realpath, stat } from 'node:fs/promises'
import { basename, dirname, isAbsolute, join, relative, resolve, sep } from 'node:path'

/** A path the child asked for, as it will be opened. */
export interface ConfinedPath {
  /** The real path: every existing component resolved through its symlinks. */
  real: string
  /** Whether the whole path exists (false: the components after `existing` will be created by a write). */
  exists: boolean
  /** Its deepest existing ancestor (itself when it exists), resolved. */
  existing: string
}

/** Why a path was refused, in words for the child (the caller makes it a JSON-RPC error). */
export class OutsideWorkspace extends Error {}

/** Whether `path` is `root` or below it (both absolute and resolved). */
export function within(root: string, path: string): boolean {
  const rel = relative(root, path)
  return rel === '' || (!rel.startsWith(`..${sep}`) && rel !== '..' && !isAbsolute(rel))
}

/**
 * `requested` (absolute, as ACP requires) confined to `root` (already real). Throws
 * `OutsideWorkspace` for a relative path, a NUL, or a path whose real location is not
 * under `root`.
 */
export async function confine(root: string, requested: string): Promise<ConfinedPath> {
  if (requested.includes('\0')) throw new OutsideWorkspace('the path contains a NUL character')
  if (!isAbsolute(requested)) throw new OutsideWorkspace(`the path ${JSON.stringify(requested)} is not absolute (ACP paths are absolute)`)
  const lexical = resolve(requested)
  const missing: string[] = []
  let existing = lexical
  for (;;) {
    try {
      await lstat(existing)
      break
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code
      if ((code !== 'ENOENT' && code !== 'ENOTDIR') || dirname(existing) === existing) throw error
      missing.unshift(basename(existing))
      existing = dirname(existing)
    }
  }
  let real: string
  try {
    real = await realpath(existing)
  } catch (error) {
    // A symlink whose target does not exist: where a write would land cannot be judged.
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') throw new OutsideWorkspace(`${lexical} is a symlink whose target does not exist`)
    throw error
  }
  if (!within(root, real)) throw new OutsideWorkspace(`${lexical} is outside the workspace ${root}${real !== existing ? ` (it resolves to ${real})` : ''}`)
  return { real: missing.length === 0 ? real : join(real, ...missing), exists: missing.length === 0, existing: real }
}

/** Read a confined file's text (it must exist and be a regular file of at most `maxBytes`). */
export async function readConfined(path: ConfinedPath, maxBytes: number): Promise<string> {
  const handle = await open(path.real, constants.O_RDONLY | constants.O_NOFOLLOW)
  try {
    const info = await handle.stat()
    if (!info.isFile()) throw new OutsideWorkspace(`${path.real} is not a regular file`)
    if (info.size > maxBytes) throw new TooLarge(info.size, maxBytes)
    return await handle.readFile({ encoding: 'utf8' })
  } finally {
    await handle.close()
  }
}

export class TooLarge extends Error {
  constructor(
    readonly bytes: number,
    readonly maxBytes: number,
  ) {
    super(`the file is ${bytes} bytes, over the ${maxBytes}-byte limit of one fs/read_text_file (the frame limit, maxFrameBytes); read it in parts with a command instead`)
  }
}

/** Refuse a write that could only fail (the path is a directory or a device): before anyone is asked about it. */
export async function checkWritable(path: ConfinedPath): Promise<void> {
  if (path.exists && !(await stat(path.real)).isFile()) throw new OutsideWorkspace(`${path.real} is not a regular file`)
}

/**
 * Write `content` to a confined path: missing directories are made (below the existing
 * ancestor, which is inside the root), and the file itself is opened without following a
 * symlink, so one swapped in since the check is refused rather than written through.
 */
export async function writeConfined(path: ConfinedPath, content: string): Promise<void> {
  await checkWritable(path)
  if (!path.exists) await mkdir(dirname(path.real), { recursive: true })
  const handle = await open(path.real, constants.O_WRONLY | constants.O_CREAT | constants.O_TRUNC | constants.O_NOFOLLOW, 0o666)
  try {
    await handle.writeFile(content, 'utf8')
  } finally {
    await handle.close()
  }
}

/** A confined directory (a terminal's cwd): it must exist and be a directory. */
export async function confineDirectory(root: string, requested: string): Promise<string> {
  const path = await confine(root, requested)
  if (!path.exists || !(await stat(path.real)).isDirectory()) throw new OutsideWorkspace(`${resolve(requested)} is not a directory`)
  return path.real
}
