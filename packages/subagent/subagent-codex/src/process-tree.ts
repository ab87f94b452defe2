/**
 * The app-server process and everything it starts, reaped as one unit.
 *
 * The server is spawned `detached`, so it leads a new process group and a signal to
 * `-pid` reaches the commands it runs. A command Codex runs in a PTY gets its own session
 * (and so its own group), which is why the tree is also followed through `/proc` parent
 * links while the leader lives. `reap()` is the only way the tree ends.
 */
import { spawn, type ChildProcess } from 'node:child_process'
import { readdir, readFile } from 'node:fs/promises'

export interface ExitInfo {
  code: number | null
  signal: NodeJS.Signals | null
}

export interface SpawnSpec {
  command: string
  args: readonly string[]
  cwd: string
  env: NodeJS.ProcessEnv
}

/** How much of the server's stderr is kept for diagnostics. */
const STDERR_TAIL_CHARS = 4000
/** After SIGKILL, how long to wait before calling the tree unkillable. */
const KILL_WAIT_MS = 5000
const POLL_MS = 20

export function describeExit(exit: ExitInfo): string {
  return exit.signal ? `was killed by ${exit.signal}` : `exited with code ${exit.code}`
}

export class ProcessTree {
  readonly child: ChildProcess
  /** Resolves once the process runs; rejects with the spawn error (ENOENT, EACCES, a missing cwd, …). */
  readonly spawned: Promise<void>
  /** Resolves when the leader has exited (never, if it never started). */
  readonly exited: Promise<ExitInfo>
  private exitInfo: ExitInfo | undefined
  private stderrText = ''
  private readonly stderrClosed: Promise<void>
  /**
   * Every process seen below the leader, by pid → start time: they outlive the parent
   * link once the leader exits, and the start time tells a reused pid from the original.
   */
  private readonly tracked = new Map<number, number>()
  private reaping: Promise<void> | undefined

  constructor(spec: SpawnSpec) {
    this.child = spawn(spec.command, [...spec.args], { cwd: spec.cwd, env: spec.env, stdio: ['pipe', 'pipe', 'pipe'], detached: true })
    const { child } = this
    this.spawned = new Promise<void>((resolve, reject) => {
      child.once('spawn', resolve)
      child.once('error', reject)
    })
    // Observed by the run's startup; this keeps an early spawn error from being unhandled.
    this.spawned.catch(() => {})
    this.exited = new Promise<ExitInfo>((resolve) => {
      child.once('exit', (code, signal) => {
        this.exitInfo = { code, signal }
        resolve(this.exitInfo)
      })
    })
    // Writing to a dead server fails with EPIPE; the exit watcher reports the death with
    // its code, so the write error carries nothing more.
    child.stdin!.on('error', () => {})
    child.stderr!.setEncoding('utf8')
    child.stderr!.on('data', (chunk: string) => {
      this.stderrText = (this.stderrText + chunk).slice(-STDERR_TAIL_CHARS)
    })
    this.stderrClosed = new Promise<void>((resolve) => child.stderr!.once('close', resolve))
  }

  get pid(): number | undefined {
    return this.child.pid
  }

  get exit(): ExitInfo | undefined {
    return this.exitInfo
  }

  /** The server's last stderr output, on one line, at most `chars` long. */
  stderrTail(chars = 600): string {
    // Codex logs with ANSI colours; a diagnostic is plain text.
    const plain = this.stderrText.replace(/\x1b\[[0-9;]*m/g, '').replace(/\s+/g, ' ').trim()
    return plain.length > chars ? `…${plain.slice(-chars)}` : plain
  }

  /** Waits for the exit (at most `ms`), then briefly for stderr to drain so a diagnostic quotes the last words. */
  async settledExit(ms: number): Promise<ExitInfo | undefined> {
    const exit = this.exitInfo ?? (await within(this.exited, ms))
    if (exit) await within(this.stderrClosed, 200)
    return exit
  }

  /**
   * Close stdin (the app-server exits when its input ends) → grace → SIGTERM → grace →
   * SIGKILL, each signal sent to the group and to every tracked descendant. Resolves once
   * the leader has exited and nothing it started is alive; rejects only if something
   * survives SIGKILL. Idempotent: every caller shares one reaping.
   */
  reap(graceMs: number): Promise<void> {
    this.reaping ??= this.runReap(graceMs)
    return this.reaping
  }

  private async runReap(graceMs: number): Promise<void> {
    const pid = this.pid
    try {
      if (pid === undefined) return
      await this.track()
      this.child.stdin!.end()
      if (await this.waitGone(graceMs)) return
      await this.signalAll('SIGTERM')
      if (await this.waitGone(graceMs)) return
      await this.signalAll('SIGKILL')
      if (await this.waitGone(KILL_WAIT_MS)) return
      throw new Error(`the codex app-server's process tree (group ${pid}) still has live processes ${KILL_WAIT_MS} ms after SIGKILL`)
    } finally {
      // Our ends of the pipes: a grandchild that escaped could hold the other ends open forever.
      this.child.stdin?.destroy()
      this.child.stdout?.destroy()
      this.child.stderr?.destroy()
    }
  }

  /** Remember every current descendant of the leader (only while it lives are the parent links intact). */
  private async track(): Promise<void> {
    if (this.exitInfo || this.pid === undefined) return
    const table = await processTable()
    if (!table) return
    const children = new Map<number, number[]>()
    for (const [pid, entry] of table) children.set(entry.ppid, [...(children.get(entry.ppid) ?? []), pid])
    const queue = [...(children.get(this.pid) ?? [])]
    for (let pid = queue.shift(); pid !== undefined; pid = queue.shift()) {
      this.tracked.set(pid, table.get(pid)!.startTime)
      queue.push(...(children.get(pid) ?? []))
    }
  }

  private async signalAll(signal: NodeJS.Signals): Promise<void> {
    await this.track()
    sendSignal(-this.pid!, signal)
    const table = await processTable()
    for (const [pid, entry] of table ?? []) if (this.isTracked(pid, entry)) sendSignal(pid, signal)
  }

  private isTracked(pid: number, entry: ProcessEntry): boolean {
    return this.tracked.get(pid) === entry.startTime
  }

  /** True once the leader has exited and neither its group nor a tracked descendant has a live member, within `ms`. */
  private async waitGone(ms: number): Promise<boolean> {
    const deadline = Date.now() + ms
    for (;;) {
      if (this.exitInfo && !(await this.anyAlive())) return true
      if (Date.now() >= deadline) return false
      await new Promise((resolve) => setTimeout(resolve, POLL_MS))
    }
  }

  private async anyAlive(): Promise<boolean> {
    const table = await processTable()
    if (!table) {
      // No /proc: the group signal probe is all there is (it also counts zombies).
      return probe(-this.pid!)
    }
    for (const [pid, entry] of table) {
      if (!isLive(entry.state)) continue
      if (entry.pgid === this.pid || this.isTracked(pid, entry)) return true
    }
    return false
  }
}

interface ProcessEntry {
  ppid: number
  pgid: number
  state: string
  /** Clock ticks after boot: with the pid, it names one process for good. */
  startTime: number
}

/**
 * Every process's parent, group and state, from `/proc`; `undefined` where there is none.
 * Zombies matter: a killed grandchild re-parented to an init that never reaps (common in
 * containers) stays a zombie forever, so "in the group" is not "alive".
 */
async function processTable(): Promise<Map<number, ProcessEntry> | undefined> {
  let names: string[]
  try {
    names = await readdir('/proc')
  } catch {
    return undefined
  }
  const table = new Map<number, ProcessEntry>()
  await Promise.all(
    names
      .filter((name) => /^\d+$/.test(name))
      .map(async (name) => {
        let stat: string
        try {
          stat = await readFile(`/proc/${name}/stat`, 'utf8')
        } catch {
          // The process exited between readdir and here.
          return
        }
        // `pid (comm) state ppid pgrp … starttime(22nd) …`; comm may itself hold spaces and parentheses.
        const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
        table.set(Number(name), { state: fields[0], ppid: Number(fields[1]), pgid: Number(fields[2]), startTime: Number(fields[19]) })
      }),
  )
  return table
}

function isLive(state: string): boolean {
  return state !== 'Z' && state !== 'X'
}

function sendSignal(target: number, signal: NodeJS.Signals): void {
  try {
    process.kill(target, signal)
  } catch (error) {
    // ESRCH: already gone. EPERM (a pid reused by someone else's process) is left alone on purpose.
    const code = (error as NodeJS.ErrnoException).code
    if (code !== 'ESRCH' && code !== 'EPERM') throw error
  }
}

function probe(target: number): boolean {
  try {
    process.kill(target, 0)
    return true
  } catch (error) {
    return (error as NodeJS.ErrnoException).code !== 'ESRCH'
  }
}

async function within<T>(promise: Promise<T>, ms: number): Promise<T | undefined> {
  let timer: NodeJS.Timeout | undefined
  try {
    return await Promise.race([promise, new Promise<undefined>((resolve) => (timer = setTimeout(() => resolve(undefined), ms)))])
  } finally {
    clearTimeout(timer)
  }
}
