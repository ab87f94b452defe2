import { open, stat, type FileHandle } from 'node:fs/promises'
import { FileToolError, fsProblem } from './errors.js'
import { resolveExisting, type Confinement } from './paths.js'
import { bounded, cutLine } from './render.js'

export interface ReadArgs {
  path: string
  offset?: number
  limit?: number
}

export interface ReadLimits {
  /** Files larger than this are refused by their size, before a byte is read. */
  maxFileBytes: number
  /** Lines shown when the call names no `limit`. */
  defaultLines: number
  /** Longer lines are cut. */
  maxLineChars: number
  /** The whole result. */
  maxOutputChars: number
}

/** How much of a file's start is looked at for a NUL byte: the test git and ripgrep use for "binary". */
export const BINARY_PROBE_BYTES = 8192

/**
 * The text of a regular file inside the confinement, refused by size (from `stat`, nothing
 * read) or as binary (a NUL byte in its first 8 KiB). Shared by `read` and `edit`.
 */
export async function readTextFile(real: string, name: string, maxFileBytes: number): Promise<string> {
  let handle: FileHandle
  try {
    // Refused before opening: opening a FIFO would wait for a writer, a device could be endless.
    const info = await stat(real)
    if (info.isDirectory()) throw new FileToolError('IS_DIRECTORY', `${name} is a directory (list it with ls)`)
    if (!info.isFile()) throw new FileToolError('NOT_A_FILE', `${name} is not a regular file`)
    if (info.size > maxFileBytes) {
      throw new FileToolError('TOO_LARGE', `${name} is ${info.size} bytes, more than the ${maxFileBytes} the file tools read; search it with grep, or look at parts with bash (head, tail, sed -n)`)
    }
    handle = await open(real, 'r')
  } catch (error) {
    if (error instanceof FileToolError) throw error
    throw new FileToolError('UNREADABLE', `${name}: ${fsProblem(error)}`)
  }
  try {
    const bytes = await handle.readFile()
    if (bytes.subarray(0, BINARY_PROBE_BYTES).includes(0)) throw new FileToolError('BINARY', `${name} is a binary file (it holds NUL bytes); the file tools read text only`)
    // The size was checked before the read; a file that grew since is still held to it.
    if (bytes.length > maxFileBytes) throw new FileToolError('TOO_LARGE', `${name} grew past ${maxFileBytes} bytes while it was read`)
    return bytes.toString('utf8')
  } finally {
    await handle.close()
  }
}

/** `read`: the lines `offset` (1-based) to `offset + limit - 1`, numbered as `cat -n` numbers them. */
export async function readFileTool(confinement: Confinement, args: ReadArgs, limits: ReadLimits): Promise<string> {
  const { real, name } = await resolveExisting(confinement, args.path)
  const text = await readTextFile(real, name, limits.maxFileBytes)
  if (text === '') return `${name} is empty`
  const lines = text.split('\n')
  // A final newline ends the last line; it does not start another.
  if (lines[lines.length - 1] === '') lines.pop()
  const first = args.offset ?? 1
  if (first > lines.length) throw new FileToolError('INVALID_ARGS', `offset ${first} is past the end of ${name}, which has ${lines.length} lines`)
  const last = Math.min(lines.length, first - 1 + (args.limit ?? limits.defaultLines))
  const width = String(last).length
  const numbered: string[] = []
  for (let line = first; line <= last; line++) numbered.push(`${String(line).padStart(Math.max(6, width))}\t${cutLine(lines[line - 1]!, limits.maxLineChars)}`)
  let out = numbered.join('\n')
  if (last < lines.length || first > 1) out += `\n(lines ${first}-${last} of ${lines.length}${last < lines.length ? `; read on with offset ${last + 1}` : ''})`
  return bounded(out, limits.maxOutputChars, 'read a smaller range with offset and limit')
}
