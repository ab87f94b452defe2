/**
 * Where a file's text is read from and written to: the seam under `read`, `write` and
 * `edit`. Paths are resolved and confined here, on this machine, before any access is
 * asked (`paths.ts`); what an access does is only the reading and the writing of one file
 * already judged. This machine's file system is the default; a host chooses another per
 * agent with `ctx.files.addRouter` (`dsh acp`: the client's `fs/read_text_file` and
 * `fs/write_text_file`, so an editor's unsaved text is what is read and its buffers record
 * the edits). `glob`, `grep` and `ls` always look at the local file system.
 *
 * This module is also the package's `./access` entry: the path confinement and the local
 * access, without the tools, for an ACP child's shared workspace (`@dsh/subagent-acp`),
 * which confines its client's `fs/*` exactly as these tools confine their paths.
 */
import type { ToolAgent } from '@dsh/tools'
import { readTextFile } from './read.js'
import { replaceFile } from './write.js'

/** A file whose path has been confined: its real path, and the one name it is shown (and asked about) by. */
export interface ConfinedFile {
  readonly real: string
  readonly name: string
}

export interface FileAccess {
  /** Who reads and writes, for messages (`the ACP client`). */
  readonly name: string
  /**
   * The whole text of `file`. Held to what the tools read: not a directory, FIFO or
   * device, at most `maxFileBytes`, no NUL byte in the first 8 KiB (`checkReadable`,
   * `acceptText`); a refusal is a `FileToolError`.
   */
  readText(file: ConfinedFile, maxFileBytes: number, signal: AbortSignal): Promise<string>
  /** Replace `file`'s whole content, creating it (and its missing directories) if it does not exist. */
  writeText(file: ConfinedFile, content: string, signal: AbortSignal): Promise<void>
}

/**
 * Picks another access for one agent's calls, or `undefined` to leave them local. Added with
 * `ctx.files.addRouter`; the most recently added router that picks one wins.
 */
export type FileAccessRouter = (agent: ToolAgent) => FileAccess | undefined

/** This machine's file system: a write replaces the file as one step (written beside it, renamed over it). */
export const LOCAL_FILE_ACCESS: FileAccess = {
  name: 'the local file system',
  readText: (file, maxFileBytes) => readTextFile(file.real, file.name, maxFileBytes),
  writeText: (file, content) => replaceFile(file.real, content, file.name),
}

export { confinementOfDirectory, resolveExisting, resolveWriteTarget, type Confinement } from './paths.js'
export { acceptText, checkReadable } from './read.js'
export { FileToolError, type FileToolErrorCode } from './errors.js'
