import { constants } from 'node:fs'
import { open, stat, type FileHandle } from 'node:fs/promises'
import { FileToolError, fsProblem } from './errors.js'
import { resolveExisting, type Confinement } from './paths.js'
import { bounded, cutLine } from './render.js'
import type { FileAccess } from './access.js'

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
 * Refuse what is not a readable text file by `stat` alone, before a byte is read: a
 * directory, a FIFO or device (opening a FIFO would wait for a writer, a device could be
 * endless), a file over `maxFileBytes` (a 2 GB log costs one `stat`). Every file access
 * checks this first, the ACP client's too.
 */
export async function checkReadable(real: string, name: string, maxFileBytes: number): Promise<void> {
  let info
  try {
    info = await stat(real)
  } catch (error) {
    throw new FileToolError('UNREADABLE', `${name}: ${fsProblem(error)}`)
  }
  if (info.isDirectory()) throw new FileToolError('IS_DIRECTORY', `${name} is a directory (list it with ls)`)
  if (!info.isFile()) throw new FileToolError('NOT_A_FILE', `${name} is not a regular file`)
  if (info.size > maxFileBytes) {
    throw new FileToolError('TOO_LARGE', `${name} is ${info.size} bytes, more than the ${maxFileBytes} the file tools read; search it with grep, or look at parts with bash (head, tail, sed -n)`)
  }
}

/** Text read by any file access, held to what the tools read: no NUL byte in its first 8 KiB (binary), at most `maxFileBytes`. */
export function acceptText(text: string, name: string, maxFileBytes: number): string {
  if (text.slice(0, BINARY_PROBE_BYTES).includes('\0')) throw new FileToolError('BINARY', `${name} is a binary file (it holds NUL bytes); the file tools read text only`)
  // The size was checked before the read; a file that grew since is still held to it.
  if (Buffer.byteLength(text, 'utf8') > maxFileBytes) throw new FileToolError('TOO_LARGE', `${name} grew past ${maxFileBytes} bytes while it was read`)
  return text
}

/**
 * The text of a regular file inside the confinement, from this machine's file system,
 * refused by size (from `stat`, nothing read) or as binary (a NUL byte in its first 8 KiB).
 * `real` is a real path: it is opened without following a link, so one swapped into its
 * place since it was resolved is refused rather than read through.
 */
export async function readTextFile(real: string, name: string, maxFileBytes: number): Promise<string> {
  await checkReadable(real, name, maxFileBytes)
  let handle: FileHandle
  try {
    handle = await open(real, constants.O_RDONLY | constants.O_NOFOLLOW)
  } catch (error) {
    throw new FileToolError((error as NodeJS.ErrnoException).code === 'ELOOP' ? 'LINK_LOOP' : 'UNREADABLE', `${name}: ${fsProblem(error)}`)
  }
  try {
    const bytes = await handle.readFile()
    if (bytes.subarray(0, BINARY_PROBE_BYTES).includes(0)) throw new FileToolError('BINARY', `${name} is a binary file (it holds NUL bytes); the file tools read text only`)
    if (bytes.length > maxFileBytes) throw new FileToolError('TOO_LARGE', `${name} grew past ${maxFileBytes} bytes while it was read`)
    return bytes.toString('utf8')
  } finally {
    await handle.close()
  }
}

/** `read`: the lines `offset` (1-based) to `offset + limit - 1`, numbered as `cat -n` numbers them. */
export async function readFileTool(confinement: Confinement, args: ReadArgs, limits: ReadLimits, access: FileAccess, signal: AbortSignal): Promise<string> {
  const file = await resolveExisting(confinement, args.path)
  const { name } = file
  const text = await access.readText(file, limits.maxFileBytes, signal)
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
