/**
 * `dsh acp`'s commands through its client's terminal. When the client advertises
 * `terminal: true` in `initialize`, the connection adds a router to `ctx.bash`
 * (`addRouter`): a command of an agent of one of its sessions (the session's own agent,
 * or an in-process child it delegated to) whose cwd is the session's directory or below
 * runs on the client, as `terminal/create { command: 'bash', args: ['-c', command], cwd }`
 * then `terminal/wait_for_exit`, `terminal/output` and `terminal/release`; a stop is
 * `terminal/kill`. Everything else (no agent named, another directory such as a child's
 * worktree, a sandboxed command, a client without a terminal) runs on the registered
 * executor as before. The bash tool is unchanged: it names the calling agent in its
 * request, and the executor is chosen per request.
 *
 * Permission is still this process's: the bash tool's call meets `ctx.approvals` first
 * (which may ask this very client). The client may decide again on its side when the
 * command arrives; a dsh parent (`@dsh/subagent-acp` with `sharedWorkspace`) does not ask
 * twice for a command its broker has just allowed for this child.
 */
import { methods, RequestError, type AgentContext, type ClientCapabilities, type TerminalOutputResponse } from '@agentclientprotocol/sdk'
import { isAbsolute, relative, resolve, sep } from 'node:path'
import { errorMessage } from '@dsh/base'
import { BashError, BoundedOutput, type BashExecutor, type BashExit, type BashProcess, type BashRequest, type BashRouter, type OutputSlice } from '@dsh/bash'

/** Output kept per command, as the local executor's default. */
export const CLIENT_TERMINAL_OUTPUT_CHARS = 30_000

/** Where the client's output scrolled past what was read of it. */
const SCROLLED_MARKER = '\n[... output the ACP client no longer kept was dropped ...]\n'

/**
 * How long the client has to confirm a command's end after `terminal/kill`, and to answer
 * `terminal/release`: a client that does not is not waited for any longer (the exit says so).
 */
export const CLIENT_STOP_GRACE_MS = 5_000

/** While a reader follows a running command (a background task), how often the client is asked for its output. */
const OUTPUT_POLL_MS = 500

/** Whether `capabilities` (a client's `initialize`) offers a terminal. */
export function offersTerminal(capabilities: ClientCapabilities | undefined): boolean {
  return capabilities?.terminal === true
}

/** Whether `path` is `dir` or below it (both absolute). */
export function isWithin(dir: string, path: string): boolean {
  const rel = relative(resolve(dir), resolve(path))
  return rel === '' || (rel !== '..' && !rel.startsWith(`..${sep}`) && !isAbsolute(rel))
}

/**
 * The router `ctx.bash` consults for one connection: a command of an agent that belongs to
 * one of its sessions (`sessionOf`), in that session's directory, goes to the client's
 * terminal; anything else, and everything while the client offers no terminal, is left to
 * the registered executor.
 */
export function clientTerminalRouter(options: {
  client: AgentContext
  capabilities: () => ClientCapabilities | undefined
  sessionOf: (agentId: string) => { id: string } | undefined
  cwdOf: (sessionId: string) => string | undefined
}): { route: BashRouter; stopAll(): Promise<void> } {
  const executor = new ClientTerminalExecutor(options.client, (agentId) => options.sessionOf(agentId)?.id)
  const route: BashRouter = (request) => {
    // A confined command stays here: the client's terminal cannot promise bubblewrap's sandbox.
    if (request.agentId === undefined || request.sandbox !== undefined || !offersTerminal(options.capabilities())) return undefined
    const session = options.sessionOf(request.agentId)
    const cwd = session && options.cwdOf(session.id)
    if (cwd === undefined || !isWithin(cwd, request.cwd)) return undefined
    return executor
  }
  return { route, stopAll: () => executor.stopAll() }
}

/** Runs commands on one connection's client, each in the ACP session its agent belongs to. */
export class ClientTerminalExecutor implements BashExecutor {
  readonly name = 'acp-client-terminal'
  private readonly live = new Set<ClientTerminalProcess>()

  constructor(
    private readonly client: AgentContext,
    /** The ACP session of an agent (its own, or the one that delegated to it in this process). */
    private readonly sessionOf: (agentId: string) => string | undefined,
  ) {}

  start(request: BashRequest): BashProcess {
    const sessionId = request.agentId === undefined ? undefined : this.sessionOf(request.agentId)
    // The router sends only a session's agents here; anything else would have no session to name.
    if (sessionId === undefined) throw new BashError('INVALID_REQUEST', `the command of agent ${request.agentId ?? '(none)'} belongs to no ACP session of this connection`)
    const process = new ClientTerminalProcess(this.client, sessionId, request)
    this.live.add(process)
    void process.exited.then(() => this.live.delete(process))
    return process
  }

  /** Stop every command still running; resolves once each has answered (or the connection is gone). */
  async stopAll(): Promise<void> {
    await Promise.all([...this.live].map((process) => process.stop()))
  }
}

class ClientTerminalProcess implements BashProcess {
  /** The command runs on the client: there is no local process. */
  readonly pid = undefined
  readonly exited: Promise<BashExit>
  private readonly captured = BoundedOutput.withLimit(CLIENT_TERMINAL_OUTPUT_CHARS)
  /** The client's last output, to tell what is new in the next one. */
  private lastSnapshot = ''
  private terminalId: string | undefined
  private stopRequested = false
  private timedOut = false
  private ended = false
  private timer: NodeJS.Timeout | undefined
  private polling: Promise<void> | undefined
  private lastPoll = 0
  /** Aborted to withdraw a `terminal/create` still waiting (the client may be asking its user). */
  private readonly withdraw = new AbortController()
  /** Aborted `CLIENT_STOP_GRACE_MS` after a kill the client has not confirmed: it is waited for no longer. */
  private readonly givenUp = new AbortController()
  private readonly onAbort = () => void this.stop()

  constructor(
    private readonly client: AgentContext,
    private readonly sessionId: string,
    private readonly request: BashRequest,
  ) {
    this.exited = this.run()
    if (request.timeoutMs !== undefined) {
      this.timer = setTimeout(() => {
        this.timedOut = true
        void this.stop()
      }, request.timeoutMs)
    }
    if (request.signal?.aborted) void this.stop()
    else request.signal?.addEventListener('abort', this.onAbort, { once: true })
  }

  read(cursor: number): OutputSlice {
    if (!this.ended) this.poll()
    return this.captured.read(cursor)
  }

  output(): string {
    return this.captured.text()
  }

  stop(): Promise<BashExit> {
    if (!this.stopRequested && !this.ended) {
      this.stopRequested = true
      if (this.terminalId === undefined) this.withdraw.abort(new Error('the command was stopped before the client started it'))
      else this.kill()
    }
    return this.exited
  }

  private async run(): Promise<BashExit> {
    const { client, sessionId, request } = this
    try {
      let terminalId: string
      try {
        const env = Object.entries(request.env ?? {}).map(([name, value]) => ({ name, value }))
        ;({ terminalId } = await client.request(
          methods.client.terminal.create,
          { sessionId, command: 'bash', args: ['-c', request.command], cwd: request.cwd, outputByteLimit: 4 * CLIENT_TERMINAL_OUTPUT_CHARS, ...(env.length > 0 && { env }) },
          { cancellationSignal: this.withdraw.signal, stopWaitingOnCancel: true },
        ))
      } catch (error) {
        if (this.stopRequested) return this.exit({ exitCode: null, signal: null })
        return this.exit({ exitCode: null, signal: null, error: `the ACP client did not run it: ${describeClientError(error)}` })
      }
      this.terminalId = terminalId
      if (this.stopRequested) this.kill()
      const bounded = { cancellationSignal: this.givenUp.signal, stopWaitingOnCancel: true }
      try {
        const status = await client.request(methods.client.terminal.waitForExit, { sessionId, terminalId }, bounded)
        this.absorb(await client.request(methods.client.terminal.output, { sessionId, terminalId }, bounded))
        return this.exit({ exitCode: status.exitCode ?? null, signal: status.signal ?? null })
      } catch (error) {
        if (this.givenUp.signal.aborted) {
          // Stopped as far as this side can tell (the exit says stopped); the output says what is not known.
          this.captured.append(`\n[the ACP client did not confirm that the command ended within ${CLIENT_STOP_GRACE_MS} ms of terminal/kill; it may still be running there]\n`)
          return this.exit({ exitCode: null, signal: null })
        }
        return this.exit({ exitCode: null, signal: null, error: `the ACP client's terminal failed: ${describeClientError(error)}` })
      } finally {
        // Released before the exit is reported: nothing of the command is left on the client.
        await client.request(methods.client.terminal.release, { sessionId, terminalId }, { cancellationSignal: AbortSignal.timeout(CLIENT_STOP_GRACE_MS), stopWaitingOnCancel: true }).catch(() => {
          // The connection is gone, the client forgot it already, or it does not answer: nothing more to do.
        })
      }
    } finally {
      this.ended = true
      clearTimeout(this.timer)
      request.signal?.removeEventListener('abort', this.onAbort)
    }
  }

  private exit(ending: { exitCode: number | null; signal: string | null; error?: string }): BashExit {
    const exit: BashExit = { exitCode: ending.exitCode, signal: ending.signal, timedOut: this.timedOut, stopped: this.stopRequested, leftovers: false }
    if (ending.error !== undefined) exit.error = ending.error
    return exit
  }

  private kill(): void {
    this.client.request(methods.client.terminal.kill, { sessionId: this.sessionId, terminalId: this.terminalId! }).catch(() => {
      // Already exited and forgotten, or the connection is gone: wait_for_exit settles either way.
    })
    // A client that never confirms the end must not hold the call (and the prompt) forever.
    setTimeout(() => this.givenUp.abort(new Error('the ACP client did not confirm the kill')), CLIENT_STOP_GRACE_MS).unref()
  }

  /** A reader follows the running command: fetch the client's output now and then, one request at a time. */
  private poll(): void {
    const { terminalId } = this
    if (terminalId === undefined || this.polling || Date.now() - this.lastPoll < OUTPUT_POLL_MS) return
    this.lastPoll = Date.now()
    this.polling = this.client
      .request(methods.client.terminal.output, { sessionId: this.sessionId, terminalId })
      .then((output) => {
        if (!this.ended) this.absorb(output)
      })
      .catch(() => {
        // It ended meanwhile, or the connection went away: the run settles on its own.
      })
      .finally(() => (this.polling = undefined))
  }

  /**
   * Take what is new in the client's output. The client keeps the end of the output
   * within its byte limit, so a later snapshot either extends the last one or has
   * scrolled: the part after the last one's end is found by its last characters, and
   * when it cannot be, a marker says output was lost.
   */
  private absorb(response: TerminalOutputResponse): void {
    const next = response.output
    const last = this.lastSnapshot
    if (next.startsWith(last)) this.captured.append(next.slice(last.length))
    else {
      const anchor = last.slice(-256)
      const at = anchor ? next.lastIndexOf(anchor) : -1
      if (at >= 0) this.captured.append(next.slice(at + anchor.length))
      else this.captured.append(`${SCROLLED_MARKER}${next}`)
    }
    this.lastSnapshot = next
  }
}

/** A client's error answer in one line: its message, and its details when they add something. */
export function describeClientError(error: unknown): string {
  if (error instanceof RequestError) {
    const details = (error.data as { details?: unknown } | undefined)?.details
    return typeof details === 'string' && !error.message.includes(details) ? `${error.message} (${details})` : error.message
  }
  return errorMessage(error)
}
