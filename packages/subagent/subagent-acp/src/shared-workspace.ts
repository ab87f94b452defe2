/**
 * A shared workspace over ACP: with `sharedWorkspace: true` the provider is the agent's
 * file system and terminal (ACP's client `fs/*` and `terminal/*` methods), confined to the
 * agent's working directory (the parent's cwd, or the workspace the service made for the
 * child). One instance per agent process, owned by its `AcpChild`.
 *
 * - **Reads** within the directory are served unasked.
 * - **Writes** and **commands** are side effects of the parent's tree: each goes to the
 *   parent's approval broker first (`write` with `{ path }`, the file's one name relative
 *   to the directory, as the `write` tool asks; `bash` with `{ command }`), named as the
 *   child like its `session/request_permission`, and runs only if allowed.
 *   When the agent already asked about exactly that (its `session/request_permission`
 *   for the same command, or an `edit` or `write` of the same file, was allowed by the
 *   broker in this turn, as a `dsh acp` child does before each command and edit), that
 *   answer is used once instead of asking again: a grant the parent recorded from its own
 *   decision, never one the agent claims. A file's grant is keyed by its real path,
 *   resolved when granted, and only an ask that named the file by that path grants it (an
 *   ask about a link was judged by the link's name, never the target's).
 * - **Writes are judged again once allowed**: a path that changed while the parent
 *   decided (a directory swapped for a link) is refused, and the write itself never
 *   follows a link to where the judged file was not (`@dsh/tool-files`' replaceFile).
 * - **Paths** are confined exactly as the file tools confine theirs (`@dsh/tool-files`'
 *   confinement, on real paths; never into `.git` for a write): outside the directory is
 *   `-32602`, before anyone is asked. Files are read and written as the tools do it
 *   (binary and oversized files refused; a write replaces the file as one step).
 * - **Terminals** run through `ctx.bash` in the directory (confined when the parent's own
 *   session is), their retained output bounded by the executor and by the request's
 *   `outputByteLimit`; at most `maxTerminals` held at once. They are killed when the agent
 *   asks (`terminal/kill`, `terminal/release`), when its turn is being stopped (a cancel,
 *   a timeout), and when the agent is closed; closing waits until they are gone.
 */
import { stat } from 'node:fs/promises'
import { isAbsolute, join, relative, resolve, sep } from 'node:path'
import {
  RequestError,
  type CreateTerminalRequest,
  type CreateTerminalResponse,
  type KillTerminalRequest,
  type ReadTextFileRequest,
  type ReadTextFileResponse,
  type ReleaseTerminalRequest,
  type TerminalOutputRequest,
  type TerminalOutputResponse,
  type WaitForTerminalExitRequest,
  type WaitForTerminalExitResponse,
  type WriteTextFileRequest,
} from '@agentclientprotocol/sdk'
import { errorMessage, isRecord, type PermissionDecision } from '@dsh/base'
import type { BashExit, BashProcess, BashService } from '@dsh/bash'
import type { SandboxSpec } from '@dsh/session'
// The file tools' own confinement and local access (their ./access entry, without the tools).
import { confinementOfDirectory, FileToolError, LOCAL_FILE_ACCESS, resolveExisting, resolveWriteTarget, type Confinement } from '@dsh/tool-files/access'
import { REFUSED_BY_APPROVAL } from './permission.js'


/** A terminal's retained output when the request gives no `outputByteLimit`: 1 MiB. */
export const DEFAULT_OUTPUT_BYTE_LIMIT = 1024 * 1024

/** Allowed answers the agent may still use without being asked again; the oldest go first. */
const MAX_GRANTS = 64

/** What the workspace needs of the agent it serves (its `AcpChild`). */
export interface SharedWorkspaceHost {
  /** The agent's working directory: what it may touch. */
  readonly root: string
  /** The agent's ACP session: requests naming another are refused. */
  sessionId(): string | undefined
  /** Put one side effect to the parent's broker (or the provider's fixed policy); withdrawn with `signal`. */
  decide(tool: 'write' | 'bash', args: Record<string, unknown>, signal: AbortSignal): Promise<PermissionDecision>
  /** `ctx.bash`, when this process has it. */
  bash(): BashService | undefined
  /** The parent agent: its id (commands are its side effects, for `ctx.bash`'s routers) and its session's confinement. */
  parent(): { id: string; sandbox: SandboxSpec | undefined } | undefined
  readonly maxTerminals: number
  /** The longest file `fs/read_text_file` returns and `fs/write_text_file` writes (the frame limit). */
  readonly maxReadBytes: number
}

interface Terminal {
  readonly process: BashProcess
  readonly outputByteLimit: number
  exit?: BashExit
}

export class SharedWorkspace {
  private confinement: Promise<Confinement> | undefined
  private readonly terminals = new Map<string, Terminal>()
  /** Keys of allowed asks (`fileGrant`, `commandGrant`), each resolved when granted; `undefined`: an ask that grants nothing. */
  private readonly grants: Array<Promise<string | undefined>> = []
  private terminalCount = 0
  private stopping = false
  private closed = false

  constructor(private readonly host: SharedWorkspaceHost) {}

  /** What this workspace can serve, as `initialize`'s client capabilities say it. */
  capabilities(): { fs: { readTextFile: true; writeTextFile: true }; terminal: boolean } {
    return { fs: { readTextFile: true, writeTextFile: true }, terminal: this.host.bash() !== undefined }
  }

  // ---- fs ---------------------------------------------------------------------------

  async readTextFile(params: ReadTextFileRequest, signal: AbortSignal): Promise<ReadTextFileResponse> {
    this.checkSession(params.sessionId)
    const line = optionalCount(params.line, 'line', 1)
    const limit = optionalCount(params.limit, 'limit', 0)
    const confinement = await this.confined()
    const path = absolutePath(params.path)
    let text: string
    try {
      text = await LOCAL_FILE_ACCESS.readText(await resolveExisting(confinement, path), this.host.maxReadBytes, signal)
    } catch (error) {
      throw fsError(error, path)
    }
    if (line === undefined && limit === undefined) return { content: text }
    const lines = text.split('\n')
    const from = (line ?? 1) - 1
    return { content: lines.slice(from, limit === undefined ? undefined : from + limit).join('\n') }
  }

  async writeTextFile(params: WriteTextFileRequest, signal: AbortSignal): Promise<Record<string, never>> {
    this.checkSession(params.sessionId)
    if (typeof params.content !== 'string') throw RequestError.invalidParams({ content: typeof params.content }, 'content must be text')
    const confinement = await this.confined()
    const path = absolutePath(params.path)
    let file: Awaited<ReturnType<typeof resolveWriteTarget>>
    try {
      // Judged before anyone is asked: outside the directory, into .git, onto a directory or a dangling link.
      file = await resolveWriteTarget(confinement, path)
    } catch (error) {
      throw fsError(error, path)
    }
    // Asked as the write tool asks: rules such as write(src/**) see the file's one name.
    // A grant is matched by the real path only: the file an allowed ask named is the file written.
    await this.approve('write', { path: file.name }, fileGrant(file.real), signal)
    try {
      // The agent may have changed the tree while the parent decided: what was allowed is
      // that file, by that name; anything else is refused (and the write itself never
      // follows a link to where the judged file was not: LOCAL_FILE_ACCESS).
      const now = await resolveWriteTarget(confinement, path)
      if (now.real !== file.real) throw RequestError.invalidParams({ path }, `${file.name} was not written: the path changed while the parent decided (it now names ${now.name}); nothing was written`)
      await LOCAL_FILE_ACCESS.writeText(file, params.content, signal)
    } catch (error) {
      throw fsError(error, path)
    }
    return {}
  }

  // ---- terminals --------------------------------------------------------------------

  async createTerminal(params: CreateTerminalRequest, signal: AbortSignal): Promise<CreateTerminalResponse> {
    this.checkSession(params.sessionId)
    const bash = this.host.bash()
    if (!bash) throw RequestError.methodNotFound('terminal/create')
    const { command, env, subject } = commandOf(params)
    const outputByteLimit = optionalCount(params.outputByteLimit, 'outputByteLimit', 1) ?? DEFAULT_OUTPUT_BYTE_LIMIT
    const confinement = await this.confined()
    const root = confinement.root
    let cwd: string
    try {
      cwd = (await resolveExisting(confinement, params.cwd === undefined || params.cwd === null ? root : absolutePath(params.cwd))).real
      if (!(await stat(cwd)).isDirectory()) throw RequestError.invalidParams({ cwd: params.cwd }, `${cwd} is not a directory`)
    } catch (error) {
      throw fsError(error, params.cwd ?? root)
    }
    this.checkRoom()
    await this.approve('bash', { command: subject }, commandGrant(subject), signal)
    // Others may have been created while this one was asked about.
    this.checkRoom()
    const parent = this.host.parent()
    let process: BashProcess
    try {
      process = bash.start({
        command,
        cwd,
        ...(env && { env }),
        ...(parent && { agentId: parent.id }),
        // A confined parent's children's commands are confined as its own are.
        ...(parent?.sandbox && { sandbox: { writable: [root], network: parent.sandbox.network } }),
      })
    } catch (error) {
      throw RequestError.internalError({ command: subject }, `the command could not be started: ${errorMessage(error)}`)
    }
    const terminalId = `terminal-${++this.terminalCount}`
    const terminal: Terminal = { process, outputByteLimit }
    void process.exited.then((exit) => (terminal.exit = exit))
    this.terminals.set(terminalId, terminal)
    if (signal.aborted || this.stopping || this.closed) {
      // The agent gave up on it (or the turn is stopping) while it started: nobody will release it.
      this.terminals.delete(terminalId)
      await process.stop()
      throw RequestError.requestCancelled({ terminalId }, 'the terminal was created after its request was withdrawn, and was killed')
    }
    return { terminalId }
  }

  terminalOutput(params: TerminalOutputRequest): TerminalOutputResponse {
    const terminal = this.terminal(params)
    const retained = terminal.process.read(0)
    let text = retained.text
    if (terminal.exit?.error !== undefined) text += `${text && !text.endsWith('\n') ? '\n' : ''}the command could not be started: ${terminal.exit.error}\n`
    const { tail, cut } = tailWithin(text, terminal.outputByteLimit)
    const response: TerminalOutputResponse = { output: tail, truncated: cut || retained.skipped > 0 }
    if (terminal.exit) response.exitStatus = statusOf(terminal.exit)
    return response
  }

  async waitForTerminalExit(params: WaitForTerminalExitRequest, signal: AbortSignal): Promise<WaitForTerminalExitResponse> {
    const terminal = this.terminal(params)
    const exit = await Promise.race([terminal.process.exited, untilAborted(signal)])
    if (exit === undefined) throw RequestError.requestCancelled({ terminalId: params.terminalId })
    return statusOf(exit)
  }

  async killTerminal(params: KillTerminalRequest): Promise<Record<string, never>> {
    await this.terminal(params).process.stop()
    return {}
  }

  async releaseTerminal(params: ReleaseTerminalRequest): Promise<Record<string, never>> {
    const terminal = this.terminal(params)
    this.terminals.delete(params.terminalId)
    await terminal.process.stop()
    return {}
  }

  // ---- the agent's lifecycle --------------------------------------------------------

  /**
   * The broker allowed `tool` on `subject` for this agent (its `session/request_permission`):
   * the next write or command with that subject runs without asking again, once.
   */
  grant(tool: string, subject: string): void {
    // An allowed edit or write of a file covers the one write of it that carries it out.
    if (tool === 'edit' || tool === 'write') this.grants.push(this.fileGrantOf(subject))
    else if (tool === 'bash') this.grants.push(Promise.resolve(commandGrant(subject)))
    else return
    if (this.grants.length > MAX_GRANTS) this.grants.shift()
  }

  /**
   * The grant of an allowed ask about the file `subject` names, keyed by its real path, or
   * none (`undefined`) when the name the broker judged is not that real path: an ask about
   * `notes.txt`, a link to `Makefile`, was judged by rules on `notes.txt` and never by
   * those on `Makefile`, so it allows no write of `Makefile`. Resolved now, when granted:
   * a link made after the ask does not redirect it.
   */
  private async fileGrantOf(subject: string): Promise<string | undefined> {
    try {
      const confinement = await this.confined()
      // As asked: relative to the directory, or absolute (by the directory's name or its real path).
      const asked = isAbsolute(subject) ? subject : resolve(confinement.root, subject)
      const lexical = isWithin(asked, confinement.cwd) && !isWithin(asked, confinement.root) ? join(confinement.root, relative(confinement.cwd, asked)) : asked
      const file = await resolveWriteTarget(confinement, lexical)
      return file.real === lexical ? fileGrant(file.real) : undefined
    } catch {
      return undefined
    }
  }

  /** A turn ended: what it was allowed does not carry over to the next. */
  endTurn(): void {
    this.grants.length = 0
  }

  /** The turn is being stopped (or no longer is): its commands are killed, and nothing new starts. */
  setStopping(stopping: boolean): void {
    this.stopping = stopping
    if (!stopping) return
    this.grants.length = 0
    for (const terminal of this.terminals.values()) void terminal.process.stop()
  }

  /** The agent is gone: every command is killed; resolves once none runs. Never rejects. */
  async close(): Promise<void> {
    this.closed = true
    this.grants.length = 0
    const all = [...this.terminals.values()]
    this.terminals.clear()
    await Promise.all(all.map((terminal) => terminal.process.stop()))
  }

  /** How many terminals the agent holds (created and not released). */
  get openTerminals(): number {
    return this.terminals.size
  }

  // ---- helpers ----------------------------------------------------------------------

  /** The agent's directory as the file tools confine theirs: that directory alone, by real path. */
  private confined(): Promise<Confinement> {
    this.confinement ??= confinementOfDirectory(this.host.root, { outsideHint: 'an ACP agent reaches only its working directory through its client' })
    return this.confinement.catch((error: unknown) => {
      throw RequestError.internalError({ root: this.host.root }, `the workspace ${this.host.root} cannot be resolved: ${errorMessage(error)}`)
    })
  }

  private checkSession(sessionId: unknown): void {
    const own = this.host.sessionId()
    if (own === undefined || sessionId !== own) throw RequestError.sessionNotFound(String(sessionId))
  }

  private checkRoom(): void {
    if (this.terminals.size >= this.host.maxTerminals) {
      throw RequestError.invalidRequest({ openTerminals: this.terminals.size, maxTerminals: this.host.maxTerminals }, `this agent already holds ${this.terminals.size} terminals, the most it may (maxTerminals); release one with terminal/release first`)
    }
  }

  private terminal(params: { sessionId: string; terminalId: string }): Terminal {
    this.checkSession(params.sessionId)
    const terminal = this.terminals.get(params.terminalId)
    if (!terminal) throw RequestError.resourceNotFound(String(params.terminalId))
    return terminal
  }

  /** The broker's decision on one side effect (or an earlier allowed ask of the same one); throws unless allowed. */
  private async approve(tool: 'write' | 'bash', args: Record<string, unknown>, key: string, signal: AbortSignal): Promise<void> {
    if (this.stopping || this.closed) throw RequestError.requestCancelled(undefined, 'the agent\'s turn is being stopped')
    const grants = [...this.grants]
    const keys = await Promise.all(grants)
    if (this.stopping || this.closed) throw RequestError.requestCancelled(undefined, 'the agent\'s turn is being stopped')
    const granted = keys.indexOf(key)
    // Spent once: the very grant found, if it was not cleared (a turn's end) or spent meanwhile.
    const at = granted >= 0 ? this.grants.indexOf(grants[granted]!) : -1
    if (at >= 0) {
      this.grants.splice(at, 1)
      return
    }
    const decision = await this.host.decide(tool, args, signal)
    if (this.stopping || this.closed || signal.aborted) throw RequestError.requestCancelled(undefined, 'the request was withdrawn while the parent decided it')
    if (decision.decision !== 'reject') return
    const subject = typeof args.command === 'string' ? args.command : String(args.path)
    throw new RequestError(REFUSED_BY_APPROVAL, `${tool} ${subject.slice(0, 200)} was refused: permission denied by ${decision.by}: ${decision.reason}`, {
      decision: { decision: decision.decision, by: decision.by, reason: decision.reason, ...(decision.source !== undefined && { source: decision.source }), ...(decision.rule !== undefined && { rule: decision.rule }) },
    })
  }
}

/** A write of the file whose real path is `path` allowed once. */
function fileGrant(path: string): string {
  return `file\0${path}`
}

/** Whether `path` is `dir` or below it (both absolute, normalised). */
function isWithin(path: string, dir: string): boolean {
  return path === dir || path.startsWith(dir.endsWith(sep) ? dir : dir + sep)
}

function commandGrant(command: string): string {
  return `bash\0${command}`
}

/** ACP's paths are absolute: a relative one is refused before it is resolved against anything. */
function absolutePath(path: unknown): string {
  if (typeof path !== 'string' || path === '') throw RequestError.invalidParams({ path }, 'path must be a non-empty absolute path')
  if (!isAbsolute(path)) throw RequestError.invalidParams({ path }, `the path ${JSON.stringify(path)} is not absolute (ACP paths are absolute)`)
  return path
}

/** A refusal of the file tools' confinement or access as the JSON-RPC error the agent reads, in their words. */
function fsError(error: unknown, path: string): RequestError {
  if (error instanceof RequestError) return error
  if (!(error instanceof FileToolError)) return RequestError.internalError({ path }, `${path}: ${errorMessage(error)}`)
  switch (error.code) {
    case 'NOT_FOUND':
      return new RequestError(-32002, `Resource not found: ${error.message}`, { uri: path })
    case 'UNREADABLE':
      return RequestError.internalError({ path }, error.message)
    default:
      return RequestError.invalidParams({ path, code: error.code }, error.message)
  }
}

/** A whole number of at least `min`, or `undefined` for an absent or null field. */
function optionalCount(value: unknown, name: string, min: number): number | undefined {
  if (value === undefined || value === null) return undefined
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < min) throw RequestError.invalidParams({ [name]: value }, `${name} must be a whole number of at least ${min}`)
  return value
}

const SHELLS = new Set(['bash', '/bin/bash', '/usr/bin/bash'])
const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/
const SAFE_WORD = /^[A-Za-z0-9_@%+=:,./-]+$/

/**
 * What a `terminal/create` runs, as one `bash -c` string, and the subject the broker and its
 * rules see. `bash -c X` is X itself (what a `dsh acp` child sends for its bash tool), so
 * rules such as `bash(npm test*)` match the command that runs; otherwise the command (as a
 * shell reads it, like an editor's terminal) followed by its arguments, quoted. Variables
 * the agent sets come first in the subject (`NAME=value … command`), since they change
 * what a command does (`PATH`, `BASH_ENV`): a rule allowing the bare command does not allow it.
 */
function commandOf(params: CreateTerminalRequest): { command: string; env: Record<string, string> | undefined; subject: string } {
  const { command } = params
  const args = params.args ?? []
  if (typeof command !== 'string' || !command.trim() || command.includes('\0')) throw RequestError.invalidParams({ command }, 'command must be non-empty text without NUL characters')
  if (!Array.isArray(args) || !args.every((arg) => typeof arg === 'string' && !arg.includes('\0'))) throw RequestError.invalidParams({ args }, 'args must be a list of text without NUL characters')
  const line = SHELLS.has(command) && args.length === 2 && args[0] === '-c' ? args[1]! : [command, ...args.map(shellQuote)].join(' ')
  if (!line.trim()) throw RequestError.invalidParams({ args }, 'the command is empty')
  let env: Record<string, string> | undefined
  for (const variable of params.env ?? []) {
    if (!isRecord(variable) || typeof variable.name !== 'string' || !ENV_NAME.test(variable.name) || typeof variable.value !== 'string' || variable.value.includes('\0')) {
      throw RequestError.invalidParams({ env: variable }, 'each env entry must be { name, value } with a shell variable name')
    }
    env ??= {}
    env[variable.name] = variable.value
  }
  const assignments = env ? Object.entries(env).map(([name, value]) => `${name}=${shellQuote(value)}`) : []
  return { command: line, env, subject: [...assignments, line].join(' ') }
}

function shellQuote(word: string): string {
  return SAFE_WORD.test(word) ? word : `'${word.replace(/'/g, `'\\''`)}'`
}

/** The end of `text` within `limit` UTF-8 bytes, cut at a character boundary (ACP's rule: truncate from the beginning). */
function tailWithin(text: string, limit: number): { tail: string; cut: boolean } {
  const bytes = Buffer.from(text, 'utf8')
  if (bytes.length <= limit) return { tail: text, cut: false }
  let start = bytes.length - limit
  // Never start inside a character: skip its continuation bytes.
  while (start < bytes.length && (bytes[start]! & 0xc0) === 0x80) start++
  return { tail: bytes.subarray(start).toString('utf8'), cut: true }
}

function statusOf(exit: BashExit): WaitForTerminalExitResponse {
  return { exitCode: exit.exitCode, signal: exit.signal }
}

function untilAborted(signal: AbortSignal): Promise<undefined> {
  return new Promise((resolveAbort) => {
    if (signal.aborted) return resolveAbort(undefined)
    signal.addEventListener('abort', () => resolveAbort(undefined), { once: true })
  })
}
