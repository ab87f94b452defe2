import { randomBytes } from 'node:crypto'
import { constants } from 'node:fs'
import { chmod, lstat, mkdir, open, readlink, realpath, rename, rm, writeFile, type FileHandle } from 'node:fs/promises'
import { basename, dirname, join, parse, sep } from 'node:path'
import { FileToolError, fsProblem } from './errors.js'
import { resolveWritable, type Confinement } from './paths.js'
import type { FileAccess } from './access.js'

export interface WriteArgs {
  path: string
  content: string
}

export interface OneEdit {
  old_string: string
  new_string: string
  replace_all?: boolean
}

export interface EditArgs extends Partial<OneEdit> {
  path: string
  edits?: OneEdit[]
}

/**
 * Replace a file's content as one step: written beside it under a temporary name, then
 * renamed over it, so a failed write leaves the old file whole and a reader never sees
 * half of the new one. An existing file keeps its mode.
 *
 * `real` was judged (confined, and asked about) before this runs, and the tree may have
 * changed since: a sandboxed command or an ACP agent can swap a directory for a symbolic
 * link to one outside while the approval waits. So nothing here follows a link to where
 * `real` was not: missing directories are made one at a time, each checked to be a
 * directory and not a link; the parent is opened once and its real path compared with
 * `real`'s; the temporary file, its mode and the rename all go through that open
 * directory (`/proc/self/fd`), so a swap after the check cannot move them. Where
 * `/proc/self/fd` is missing the parent is checked by path right before the write and
 * again before the rename. A parent that changed refuses the write.
 */
export async function replaceFile(real: string, content: string, name: string): Promise<void> {
  const parent = dirname(real)
  let opened: FileHandle | undefined
  let temporary: string | undefined
  try {
    opened = await openParent(parent, name)
    const dir = await directoryPath(opened, parent, name)
    let mode: number | undefined
    try {
      const existing = await lstat(join(dir, basename(real)))
      // Only a file's own mode is kept: a link swapped into its place (0777) lends none.
      if (existing.isFile()) mode = existing.mode & 0o7777
    } catch {
      // A new file: the process's umask decides, as for any file it creates.
    }
    temporary = join(dir, `.${basename(real)}.dsh-${randomBytes(6).toString('hex')}.tmp`)
    // wx: never through a link planted under the temporary name.
    await writeFile(temporary, content, { flag: 'wx' })
    if (mode !== undefined) await chmod(temporary, mode)
    if (dir === parent) await checkParent(parent, name)
    await rename(temporary, join(dir, basename(real)))
    temporary = undefined
  } catch (error) {
    if (temporary !== undefined) await rm(temporary, { force: true })
    if (error instanceof FileToolError) throw error
    throw new FileToolError('UNREADABLE', `${name} could not be written: ${fsProblem(error)}; nothing was changed`)
  } finally {
    await opened?.close()
  }
}

/** `real`'s directory changed under the write: it is refused, whatever it points to now. */
function moved(name: string, parent: string, now: string): FileToolError {
  return new FileToolError('OUTSIDE', `${name} was not written: its directory ${parent} changed while the write waited (it is now ${now}, a symbolic link or another directory); nothing was written`)
}

/** The parent directory, opened; made first (one level at a time, never through a link) when missing. */
async function openParent(parent: string, name: string): Promise<FileHandle> {
  try {
    return await open(parent, constants.O_RDONLY | constants.O_DIRECTORY)
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error
  }
  let dir = parse(parent).root
  for (const part of parent.slice(dir.length).split(sep).filter((part) => part !== '')) {
    dir = join(dir, part)
    try {
      await mkdir(dir)
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error
    }
    // A real path's every ancestor is a directory, never a link: anything else is a swap.
    const stat = await lstat(dir)
    if (!stat.isDirectory()) throw moved(name, parent, `${dir}: ${stat.isSymbolicLink() ? 'a symbolic link' : 'not a directory'}`)
  }
  return open(parent, constants.O_RDONLY | constants.O_DIRECTORY)
}

/**
 * A path that reaches the opened directory itself, checked to be `parent`: through
 * `/proc/self/fd` (Linux), so what is written there stays there; else `parent`, checked by path.
 */
async function directoryPath(opened: FileHandle, parent: string, name: string): Promise<string> {
  const byDescriptor = `/proc/self/fd/${opened.fd}`
  let actual: string
  try {
    actual = await readlink(byDescriptor)
  } catch {
    await checkParent(parent, name)
    return parent
  }
  if (actual !== parent) throw moved(name, parent, actual)
  return byDescriptor
}

async function checkParent(parent: string, name: string): Promise<void> {
  const actual = await realpath(parent)
  if (actual !== parent) throw moved(name, parent, actual)
}

function countLines(text: string): number {
  if (text === '') return 0
  let lines = 1
  for (let at = text.indexOf('\n'); at !== -1 && at < text.length - 1; at = text.indexOf('\n', at + 1)) lines++
  return lines
}

/** `write`: the whole content of one file, created (with its missing directories) or replaced. */
export async function writeFileTool(confinement: Confinement, args: WriteArgs, maxFileBytes: number, access: FileAccess, signal: AbortSignal): Promise<string> {
  const bytes = Buffer.byteLength(args.content, 'utf8')
  if (bytes > maxFileBytes) throw new FileToolError('TOO_LARGE', `the content is ${bytes} bytes, more than the ${maxFileBytes} the file tools write; nothing was written`)
  const file = await resolveWritable(confinement, args.path)
  const { name, exists } = file
  await access.writeText(file, args.content, signal)
  return `${exists ? 'replaced' : 'created'} ${name} (${countLines(args.content)} lines, ${bytes} bytes)`
}

/** The edits of a call: one (`old_string`, `new_string`) or a list (`edits`), never both. */
function editsOf(args: EditArgs): OneEdit[] {
  const single = args.old_string !== undefined || args.new_string !== undefined
  if (single && args.edits !== undefined) throw new FileToolError('INVALID_ARGS', 'give either old_string and new_string or edits, not both')
  if (args.edits !== undefined) {
    if (args.edits.length === 0) throw new FileToolError('INVALID_ARGS', 'edits is empty')
    return args.edits
  }
  if (args.old_string === undefined || args.new_string === undefined) throw new FileToolError('INVALID_ARGS', 'old_string and new_string are both needed (or edits, a list of them)')
  return [{ old_string: args.old_string, new_string: args.new_string, ...(args.replace_all !== undefined && { replace_all: args.replace_all }) }]
}

/** 1-based line numbers of each start of `needle` in `text`, up to `max` of them. */
function linesOf(text: string, needle: string, max: number): number[] {
  const lines: number[] = []
  let line = 1
  let scanned = 0
  for (let at = text.indexOf(needle); at !== -1 && lines.length < max; at = text.indexOf(needle, at + needle.length)) {
    for (let nl = text.indexOf('\n', scanned); nl !== -1 && nl < at; nl = text.indexOf('\n', nl + 1)) line++
    scanned = at
    lines.push(line)
  }
  return lines
}

function occurrences(text: string, needle: string): number {
  let count = 0
  for (let at = text.indexOf(needle); at !== -1; at = text.indexOf(needle, at + needle.length)) count++
  return count
}

/**
 * `edit`: exact replacements, applied in order, each to the text the previous left. All
 * or nothing: an `old_string` that is missing, or found more than once without
 * `replace_all`, refuses the whole call and the file is not touched.
 */
export async function editFileTool(confinement: Confinement, args: EditArgs, maxFileBytes: number, access: FileAccess, signal: AbortSignal): Promise<string> {
  const edits = editsOf(args)
  const file = await resolveWritable(confinement, args.path)
  const { name, exists } = file
  if (!exists) throw new FileToolError('NOT_FOUND', `${name} does not exist; create it with write`)
  // Read and written through the same access: an editor's unsaved text is what is edited.
  let text = await access.readText(file, maxFileBytes, signal)
  const done: string[] = []
  edits.forEach((edit, index) => {
    const which = edits.length > 1 ? `edit ${index + 1}: ` : ''
    if (edit.old_string === '') throw new FileToolError('INVALID_ARGS', `${which}old_string is empty; nothing was changed`)
    if (edit.old_string === edit.new_string) throw new FileToolError('INVALID_ARGS', `${which}old_string and new_string are the same; nothing was changed`)
    const count = occurrences(text, edit.old_string)
    if (count === 0) throw new FileToolError('NO_MATCH', `${which}old_string was not found in ${name}${index > 0 ? ' (after the edits before it)' : ''}; nothing was changed`)
    if (count > 1 && edit.replace_all !== true) {
      const at = linesOf(text, edit.old_string, 10)
      throw new FileToolError('NOT_UNIQUE', `${which}old_string occurs ${count} times in ${name} (lines ${at.join(', ')}${count > at.length ? ', …' : ''}); include more of the surrounding text to make it unique, or set replace_all; nothing was changed`)
    }
    const where = linesOf(text, edit.old_string, 1)[0]!
    text = edit.replace_all === true ? text.split(edit.old_string).join(edit.new_string) : text.replace(edit.old_string, () => edit.new_string)
    done.push(`${which}${count === 1 ? `line ${where}` : `${count} replacements from line ${where}`}`)
  })
  if (Buffer.byteLength(text, 'utf8') > maxFileBytes) throw new FileToolError('TOO_LARGE', `the edited ${name} would be more than ${maxFileBytes} bytes; nothing was changed`)
  await access.writeText(file, text, signal)
  return `edited ${name}: ${done.join('; ')}`
}
