import type { ChildProcess } from 'node:child_process'
import type { Readable } from 'node:stream'
import { childEnvironment, goneWithin, groupHasLiveMembers, isLive, KILL_WAIT_MS, readProcessEntry, signalGroup, signalProcess, terminate, trackGroup, type StopSignal, type Terminable } from '@dsh/process'
import { BashError } from './errors.js'
import { BoundedOutput } from './output.js'
import { SANDBOX_PROGRAM, SANDBOX_STATUS_FD, sandboxArguments, sandboxEnvironment, sandboxPlacesProblem, sandboxProblem } from './sandbox.js'
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
  /** The bubblewrap program that confines sandboxed commands (`bwrap`, looked up on PATH). */
  sandboxProgram?: string
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
    if (request.sandbox) {
      // Never a silent fallback: a command that asked to be confined runs confined or not at all.
      const problem = this.sandboxProblem()
      if (problem !== undefined) throw new BashError('SANDBOX_UNAVAILABLE', problem)
      // Also here, for a caller of this executor that does not go through `ctx.bash`.
      const misplaced = sandboxPlacesProblem(request.sandbox)
      if (misplaced !== undefined) throw new BashError('INVALID_REQUEST', misplaced)
    }
    const process = new LocalBashProcess(request, this.options)
    this.live.add(process)
    void process.exited.then(() => this.live.delete(process))
    return process
  }

  /** Why sandboxed commands cannot run on this machine (bubblewrap missing or unable), or `undefined`. Probed once per process. */
  sandboxProblem(): string | undefined {
    return sandboxProblem(this.options.sandboxProgram)
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
  /** What is signalled and watched to stop the command: its process group, or its sandbox. */
  private readonly tree: Terminable
  private readonly sandbox: SandboxStatus | undefined
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
    // The model chooses these commands: they get the base environment (PATH, HOME, locale,
    // terminal, temp dirs) plus what the config names, like every other child dsh starts;
    // dsh's own credentials (the model's API key among them) stay with dsh.
    const env = childEnvironment(process.env, { env: request.env ?? {}, passEnv: this.options.passEnv ?? [] })
    const shell = options.shell ?? 'bash'
    // node:child_process is loaded with the first command, not with this module: loading it
    // costs every dsh start about 2 ms, and a run whose model calls no bash never needs it.
    const { spawn } = process.getBuiltinModule('node:child_process')
    if (request.sandbox) {
      this.child = spawn(options.sandboxProgram ?? SANDBOX_PROGRAM, [...sandboxArguments(request.sandbox, request.cwd, SANDBOX_STATUS_FD), shell, '-c', request.command], {
        // bubblewrap changes into the cwd inside the sandbox, and says so when it cannot.
        cwd: '/',
        env: sandboxEnvironment(env, request.sandbox),
        // Its own process group, as below: bubblewrap's first process leads it.
        detached: true,
        stdio: ['ignore', 'pipe', 'pipe', 'pipe'],
      })
      this.sandbox = new SandboxStatus(this.child.stdio[SANDBOX_STATUS_FD] as Readable)
    } else {
      this.child = spawn(shell, ['-c', request.command], {
        cwd: request.cwd,
        env,
        // Its own process group (pgid = its pid): a stop signals the group, reaching every descendant.
        detached: true,
        stdio: ['ignore', 'pipe', 'pipe'],
      })
    }
    this.pid = this.child.pid
    this.tree = this.pid === undefined ? { signal: () => {}, alive: async () => false } : this.sandbox ? sandboxTree(this.pid, this.sandbox) : groupTree(this.pid)
    // Until its group is confirmed gone, it is killed if dsh exits abruptly (a second Ctrl-C).
    // In a sandbox that is enough too: bubblewrap's first process leads the group, and its
    // death ends the sandbox's init (die-with-parent), which ends everything inside.
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
      this.stopping = terminateSafely(this.tree, this.options.killGraceMs)
    }
    return this.exited
  }

  private async lifecycle(shellEnd: Promise<ShellEnd>, closed: Promise<void>): Promise<BashExit> {
    const end = await shellEnd
    this.shellEnded = true
    let leftovers = false
    if (end.error === undefined && this.pid !== undefined) {
      if (this.sandbox) {
        if (this.stopping) await this.stopping
        // The init's pid comes on the status pipe, which may still hold it: read it to its
        // end (bubblewrap's exit closes it) before asking whether the init runs.
        await Promise.race([this.sandbox.ended, new Promise((resolve) => setTimeout(resolve, DRAIN_MS).unref())])
        // bubblewrap's first process is gone, so its init is being killed (die-with-parent),
        // and with the init the kernel kills whatever the command left in the sandbox: wait
        // for that, so `exited` means nothing of it runs. (It cannot be told apart from the
        // init's own end, so `leftovers` is not reported for a sandbox.)
        if (!(await goneWithin(() => this.tree.alive(), KILL_WAIT_MS).catch(() => true))) await terminateSafely(this.tree, 0)
      } else if (this.stopping) await this.stopping
      else if (await this.tree.alive().catch(() => false)) {
        // The shell is done but something it started (`cmd &`) still runs in its group:
        // nothing may outlive the command, so it is stopped and the exit says so.
        leftovers = true
        await terminateSafely(this.tree, this.options.killGraceMs)
      }
      await Promise.race([closed, new Promise((resolve) => setTimeout(resolve, DRAIN_MS).unref())])
    }
    this.child.stdout?.destroy()
    this.child.stderr?.destroy()
    this.sandbox?.close()
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
    else if (this.sandbox && this.stopping === undefined && this.sandbox.exitCode === undefined && end.code !== null && end.code !== 0) {
      // bubblewrap reports the command's exit code once the command has run; an exit
      // without that report is bubblewrap's own failure to set the sandbox up, and what it
      // wrote is all the output there is.
      exit.exitCode = null
      exit.refusedBySandbox = true
      exit.error = `the sandbox refused to run it: ${refusalText(this.captured.text(), end.code)}`
    }
    return exit
  }
}

/** Most characters of bubblewrap's complaint quoted in a refusal. */
const REFUSAL_CHARS = 500

function refusalText(output: string, code: number): string {
  const said = output.split('\n').filter((line) => line.startsWith('bwrap:')).join('; ')
  if (!said) return `bubblewrap exited with code ${code} before the command ran`
  return said.length > REFUSAL_CHARS ? `${said.slice(0, REFUSAL_CHARS)}…` : said
}

/** An unconfined command: its process group, which reaches every descendant that stayed in it. */
function groupTree(pgid: number): Terminable {
  return { signal: (signal) => signalGroup(pgid, signal), alive: () => groupHasLiveMembers(pgid) }
}

/**
 * A sandboxed command, seen from outside: bubblewrap's first process leads our group
 * (`pgid`), and the sandbox's init (reported on the status descriptor) leads the process
 * group the command runs in. SIGTERM goes to the command's group, so it can clean up as
 * it would unconfined (the init itself, a namespace's PID 1 with no handler, ignores it);
 * SIGKILL goes to bubblewrap and the init, whose end makes the kernel kill everything left
 * in the namespace, processes that left the command's group included. Before the init is
 * known (the first milliseconds) any signal goes to bubblewrap, which ends it all at once.
 */
function sandboxTree(pgid: number, sandbox: SandboxStatus): Terminable {
  return {
    signal: async (signal: StopSignal) => {
      const init = await sandbox.liveInit()
      if (signal === 'SIGTERM' && init && init.pgid === init.pid) return signalGroup(init.pid, 'SIGTERM')
      signalGroup(pgid, signal)
      if (init) signalProcess(init.pid, 'SIGKILL')
    },
    alive: async () => (await groupHasLiveMembers(pgid)) || (await sandbox.liveInit()) !== undefined,
  }
}

/**
 * bubblewrap's status records (`--json-status-fd`), one JSON object a line:
 * `{ "child-pid": N, … }` once the sandbox's init exists (N is its pid outside), and
 * `{ "exit-code": N }` when the command has ended. Anything else is ignored.
 */
class SandboxStatus {
  /** The sandbox's init: its pid outside, and its start time once read (so a reused pid is never mistaken for it). */
  private init: { pid: number; startTime?: number } | undefined
  exitCode: number | undefined
  /** Resolves once the pipe is closed (bubblewrap has exited) and every record is read. */
  readonly ended: Promise<void>
  private pending = ''

  constructor(private readonly stream: Readable) {
    stream.setEncoding('utf8')
    stream.on('data', (chunk: string) => this.take(chunk))
    // A broken status pipe only loses the records; the exit and the process group still tell the end.
    this.ended = new Promise<void>((resolve) => {
      stream.once('close', resolve)
      stream.on('error', () => resolve())
    })
  }

  /** The init's process entry while it runs (zombies do not count), else `undefined`. */
  async liveInit() {
    if (!this.init) return undefined
    const entry = await readProcessEntry(this.init.pid)
    if (!entry || !isLive(entry)) return undefined
    if (this.init.startTime === undefined) this.init.startTime = entry.startTime
    return entry.startTime === this.init.startTime ? entry : undefined
  }

  close(): void {
    this.stream.destroy()
  }

  private take(chunk: string): void {
    const lines = (this.pending + chunk).split('\n')
    this.pending = lines.pop() ?? ''
    for (const line of lines) {
      let record: unknown
      try {
        record = JSON.parse(line)
      } catch {
        continue
      }
      if (typeof record !== 'object' || record === null) continue
      const { 'child-pid': childPid, 'exit-code': exitCode } = record as Record<string, unknown>
      if (Number.isSafeInteger(childPid) && (childPid as number) > 0 && !this.init) {
        const pid = childPid as number
        this.init = { pid }
        // Its start time, read now while it surely runs: later looks compare against it.
        void readProcessEntry(pid).then((entry) => {
          if (entry && this.init?.pid === pid && this.init.startTime === undefined) this.init.startTime = entry.startTime
        }, () => {})
      }
      if (Number.isSafeInteger(exitCode)) this.exitCode = exitCode as number
    }
  }
}

/**
 * `terminate`, for paths that must settle: signalling can only fail with EPERM (a
 * member switched credentials, e.g. a setuid program), which leaves nothing more this
 * process may do about it, and `exited` must still resolve.
 */
function terminateSafely(tree: Terminable, graceMs: number): Promise<boolean> {
  return terminate(tree, graceMs).catch(() => false)
}
