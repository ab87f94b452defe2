import type { FileHandle } from 'node:fs/promises'
import { join } from 'node:path'
import { SessionJsonlError } from './errors.js'

export const SESSION_FILE_SUFFIX = '.jsonl'

/** Letters, digits, `_`, `-` and inner dots; never a path separator, a leading dot or `..`. */
const SESSION_ID = /^[A-Za-z0-9_-][A-Za-z0-9._-]{0,127}$/

export function isValidSessionId(id: string): boolean {
  return SESSION_ID.test(id) && !id.includes('..')
}

/** An id becomes a file name, so anything that could leave the directory is refused. */
export function assertValidSessionId(id: string): void {
  if (!isValidSessionId(id)) {
    throw new SessionJsonlError(
      'INVALID_ID',
      `session id ${JSON.stringify(id)} cannot be stored as a file: use 1-128 letters, digits, "_", "-" or inner "." (no path separators, no "..")`,
    )
  }
}

export function sessionFilePath(dir: string, id: string): string {
  assertValidSessionId(id)
  return join(dir, id + SESSION_FILE_SUFFIX)
}

/** The header line is small; anything longer than this is not a header. */
const FIRST_LINE_LIMIT = 1024 * 1024
const CHUNK = 16 * 1024

/**
 * The first line of an open file, read in small chunks so that listing a directory of
 * long sessions does not read their events. `undefined` for an empty file.
 */
export async function readFirstLine(handle: FileHandle): Promise<{ text: string; terminated: boolean } | undefined> {
  const chunks: Buffer[] = []
  let total = 0
  while (total < FIRST_LINE_LIMIT) {
    const buffer = Buffer.alloc(CHUNK)
    const { bytesRead } = await handle.read(buffer, 0, CHUNK, total)
    if (bytesRead === 0) break
    const newline = buffer.subarray(0, bytesRead).indexOf(0x0a)
    if (newline >= 0) {
      chunks.push(buffer.subarray(0, newline))
      return { text: Buffer.concat(chunks).toString('utf8'), terminated: true }
    }
    chunks.push(buffer.subarray(0, bytesRead))
    total += bytesRead
  }
  if (total === 0) return undefined
  return { text: Buffer.concat(chunks).toString('utf8'), terminated: false }
}

/** The last byte of a file of `size` bytes (size > 0). */
export async function readLastByte(handle: FileHandle, size: number): Promise<number> {
  const buffer = Buffer.alloc(1)
  await handle.read(buffer, 0, 1, size - 1)
  return buffer[0]
}
