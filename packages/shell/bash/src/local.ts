import { spawn, type ChildProcess } from 'node:child_process'
import { childEnvironment, groupHasLiveMembers, terminateGroup, trackGroup } from '@dsh/process'
import { BoundedOutput } from './output.js'
import type { BashExecutor, BashExit, BashProcess, BashRequest, OutputSlice } from './types.js'

export interface LocalExecutorOptions {
  /** SIGTERM → SIGKILL grace when a command is stopped. */
  killGraceMs: number
  /** Most characters of output kept per command (head and tail; the middle is dropped). */
  maxOutputChars: number
  /** The shell binary (`bash`). */
  shell?: string
  /** Variables of dsh's environment commands see besides the base allow-list (by exact name). */
  passEnv?: readonly string[]
}

/** After the group is gone, how long its pipes may take to close (a process that escaped with `setsid` can hold them). */
const DRAIN_MS = 500

/**
 * Runs commands on this machine with `bash -c`, each in its own process group so a stop
 * reaches the whole tree. It remembers the processes it started, so unloading it stops
 * whatever is still running.
 */
export class LocalBashExecutor implements BashExecutor {
  readonly name = 'local'
  private live = new Set<LocalBashProcess>()

  constructor(private readonly options: LocalExecutorOptions) {}

  start(request: BashRequest): BashProcess {
    const process = new LocalBashProcess(request, this.options)
    this.live.add(process)
    void process.exited.then(() => this.live.delete(process))
    return process
  }

  /** Stop every command still running; resolves once all are gone. */
  async stopAll(): Promise<void> {
    await Promise.all([...this.live].map((process) => process.stop()))
  }
}

interface ShellEnd {
  code: number | null
  signal: string | null
  error?: string
}

class LocalBashProcess implements BashProcess {
  readonly pid: number | undefined
  readonly exited: Promise<BashExit>
  private readonly captured: BoundedOutput
  private readonly child: ChildProcess
  private stopping: Promise<boolean> | undefined
  private shellEnded = false
  private timedOut = false
  private timer: NodeJS.Timeout | undefined
  private readonly onAbort = () => void this.stop()

  constructor(
    private readonly request: BashRequest,
    private readonly options: LocalExecutorOptions,
  ) {
    this.captured = BoundedOutput.withLimit(options.maxOutputChars)
    this.child = spawn(options.shell ?? 'bash', ['-c', request.command], {
      cwd: request.cwd,
      // The model chooses these commands: they get the base environment (PATH, HOME, locale,
      // terminal, temp dirs) plus what the config names, like every other child dsh starts;
      // dsh's own credentials (the model's API key among them) stay with dsh.
      env: childEnvironment(process.env, { env: request.env ?? {}, passEnv: this.options.passEnv ?? [] }),
      // Its own process group (pgid = its pid): a stop signals the group, reaching every descendant.
      detached: true,
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    this.pid = this.child.pid
    // Until its group is confirmed gone, it is killed if dsh exits abruptly (a second Ctrl-C).
    const untrack = this.pid !== undefined ? trackGroup(this.pid) : () => {}
    for (const stream of [this.child.stdout!, this.child.stderr!]) {
      stream.setEncoding('utf8')
      stream.on('data', (chunk: string) => this.captured.append(chunk))
    }
    const shellEnd = new Promise<ShellEnd>((resolve) => {
      this.child.once('exit', (code, signal) => resolve({ code, signal }))
      this.child.once('error', (error) => resolve({ code: null, signal: null, error: error.message }))
    })
    const closed = new Promise<void>((resolve) => this.child.once('close', () => resolve()))
    this.exited = this.lifecycle(shellEnd, closed)
    void this.exited.then(untrack)
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
    return this.captured.read(cursor)
  }

  output(): string {
    return this.captured.text()
  }

  stop(): Promise<BashExit> {
    if (!this.stopping && !this.shellEnded && this.pid !== undefined) {
      this.stopping = terminateGroupSafely(this.pid, this.options.killGraceMs)
    }
    return this.exited
  }

  private async lifecycle(shellEnd: Promise<ShellEnd>, closed: Promise<void>): Promise<BashExit> {
    const end = await shellEnd
    this.shellEnded = true
    let leftovers = false
    if (end.error === undefined && this.pid !== undefined) {
      if (this.stopping) await this.stopping
      else if (await groupHasLiveMembers(this.pid).catch(() => false)) {
        // The shell is done but something it started (`cmd &`) still runs in its group:
        // nothing may outlive the command, so it is stopped and the exit says so.
        leftovers = true
        await terminateGroupSafely(this.pid, this.options.killGraceMs)
      }
      await Promise.race([closed, new Promise((resolve) => setTimeout(resolve, DRAIN_MS).unref())])
    }
    this.child.stdout?.destroy()
    this.child.stderr?.destroy()
    clearTimeout(this.timer)
    this.request.signal?.removeEventListener('abort', this.onAbort)
    const exit: BashExit = {
      exitCode: end.code,
      signal: end.signal,
      timedOut: this.timedOut,
      stopped: this.stopping !== undefined,
      leftovers,
    }
    if (end.error !== undefined) exit.error = end.error
    return exit
  }
}

/**
 * `terminateGroup`, for paths that must settle: signalling can only fail with EPERM (a
 * member switched credentials, e.g. a setuid program), which leaves nothing more this
 * process may do about it, and `exited` must still resolve.
 */
function terminateGroupSafely(pgid: number, graceMs: number): Promise<boolean> {
  return terminateGroup(pgid, graceMs).catch(() => false)
}
