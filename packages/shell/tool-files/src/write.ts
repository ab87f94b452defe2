import { randomBytes } from 'node:crypto'
import { chmod, mkdir, rename, rm, stat, writeFile } from 'node:fs/promises'
import { basename, dirname, join } from 'node:path'
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
 */
export async function replaceFile(real: string, content: string, name: string): Promise<void> {
  let mode: number | undefined
  try {
    mode = (await stat(real)).mode & 0o7777
  } catch {
    // A new file: the process's umask decides, as for any file it creates.
  }
  const temporary = join(dirname(real), `.${basename(real)}.dsh-${randomBytes(6).toString('hex')}.tmp`)
  try {
    await mkdir(dirname(real), { recursive: true })
    await writeFile(temporary, content, { flag: 'wx' })
    if (mode !== undefined) await chmod(temporary, mode)
    await rename(temporary, real)
  } catch (error) {
    await rm(temporary, { force: true })
    throw new FileToolError('UNREADABLE', `${name} could not be written: ${fsProblem(error)}; nothing was changed`)
  }
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
