/**
 * `dsh acp`'s file tools through its client's `fs`. When the client advertises
 * `fs.readTextFile` and/or `fs.writeTextFile` in `initialize`, the connection adds a router
 * to `ctx.files` (`@dsh/tool-files`' `addRouter`): the `read`, `write` and `edit` calls of an
 * agent of one of its sessions (the session's own agent, or an in-process child it delegated
 * to working in the session's directory) read and write the files of the session's directory
 * as `fs/read_text_file { sessionId, path }` and `fs/write_text_file { sessionId, path,
 * content }`, so an editor answers with its unsaved text and records the edits in its
 * buffers. Everything else stays on the local file system: a method the client does not
 * offer, a file outside the session's directory (an allowed directory elsewhere), an agent
 * working elsewhere (a child's own worktree), and every agent while the client offers no fs.
 *
 * The file tools have confined the path (by real path, on this machine) and, for a write,
 * the approval broker has decided the call before the client is asked anything: the client
 * sees only files the tools would touch themselves. What it answers is held to what the
 * tools read (size, binary), and its error answers are the call's one-line refusal.
 */
import { realpath } from 'node:fs/promises'
import { methods, type AgentContext, type ClientCapabilities } from '@agentclientprotocol/sdk'
// The ./access entry: the seam and the local access without the tools (a composition without them loads no more).
import { acceptText, checkReadable, FileToolError, LOCAL_FILE_ACCESS, type ConfinedFile, type FileAccess, type FileAccessRouter } from '@dsh/tool-files/access'
import { describeClientError, isWithin } from './client-terminal.js'

/** Which of the client's `fs` methods `capabilities` (its `initialize`) offers. */
export function offersFs(capabilities: ClientCapabilities | undefined): { read: boolean; write: boolean } {
  return { read: capabilities?.fs?.readTextFile === true, write: capabilities?.fs?.writeTextFile === true }
}

/**
 * The router `ctx.files` consults for one connection: an agent that belongs to one of its
 * sessions (`sessionOf`) and works in that session's directory (`cwdOf`) reads and writes
 * that directory's files through the client, as far as the client offers `fs`.
 */
export function clientFileRouter(options: {
  client: AgentContext
  capabilities: () => ClientCapabilities | undefined
  sessionOf: (agentId: string) => { id: string } | undefined
  /** An agent's working directory (its session header's cwd). */
  cwdOf: (agentId: string) => string | undefined
}): FileAccessRouter {
  return (agent) => {
    const offered = offersFs(options.capabilities())
    if (!offered.read && !offered.write) return undefined
    const session = options.sessionOf(agent.id)
    if (session === undefined) return undefined
    const sessionCwd = options.cwdOf(session.id)
    const agentCwd = options.cwdOf(agent.id)
    // A child working in a directory of its own (a worktree) is not the client's to show.
    if (sessionCwd === undefined || agentCwd === undefined || !isWithin(sessionCwd, agentCwd)) return undefined
    return new ClientFileAccess(options.client, session.id, sessionCwd, offered)
  }
}

/** One session's files on its client: reads and writes of what is in the session's directory, as far as the client offers them. */
class ClientFileAccess implements FileAccess {
  readonly name = 'the ACP client'
  private realCwd: Promise<string | undefined> | undefined

  constructor(
    private readonly client: AgentContext,
    private readonly sessionId: string,
    private readonly cwd: string,
    private readonly offered: { read: boolean; write: boolean },
  ) {}

  async readText(file: ConfinedFile, maxFileBytes: number, signal: AbortSignal): Promise<string> {
    if (!this.offered.read || !(await this.inSession(file))) return LOCAL_FILE_ACCESS.readText(file, maxFileBytes, signal)
    // What the tools refuse by stat alone (a directory, a device, a file too large) the client is never asked for.
    await checkReadable(file.real, file.name, maxFileBytes)
    let content: unknown
    try {
      ;({ content } = await this.client.request(methods.client.fs.readTextFile, { sessionId: this.sessionId, path: file.real }, { cancellationSignal: signal, stopWaitingOnCancel: true }))
    } catch (error) {
      throw new FileToolError('UNREADABLE', `${file.name} could not be read: the ACP client answered: ${describeClientError(error)}`)
    }
    if (typeof content !== 'string') throw new FileToolError('UNREADABLE', `${file.name} could not be read: the ACP client answered without its text`)
    return acceptText(content, file.name, maxFileBytes)
  }

  async writeText(file: ConfinedFile, content: string, signal: AbortSignal): Promise<void> {
    if (!this.offered.write || !(await this.inSession(file))) return LOCAL_FILE_ACCESS.writeText(file, content, signal)
    try {
      await this.client.request(methods.client.fs.writeTextFile, { sessionId: this.sessionId, path: file.real, content }, { cancellationSignal: signal, stopWaitingOnCancel: true })
    } catch (error) {
      throw new FileToolError('UNREADABLE', `${file.name} was not written: the ACP client answered: ${describeClientError(error)}`)
    }
  }

  /** Whether `file` is in the session's directory (by real path, as the tools resolved it). */
  private async inSession(file: ConfinedFile): Promise<boolean> {
    this.realCwd ??= realpath(this.cwd).catch(() => undefined)
    const root = await this.realCwd
    return root !== undefined && isWithin(root, file.real)
  }
}
