/**
 * One child process and everything it starts, as a unit that can be reaped.
 *
 * The child is spawned `detached`, which makes it the leader of a new process group
 * (pgid = its pid), so a signal sent to `-pid` reaches its whole tree: a shell wrapper,
 * a tool it runs, a grandchild that inherited its stdout. `reap()` is the one way the
 * tree ends: close stdin, wait a grace period, SIGTERM the group, wait again, SIGKILL the
 * group, and resolve only once the leader has exited and no live process is left in
 * the group.
 */
import { spawn, type ChildProcess } from 'node:child_process'
import { readdir, readFile } from 'node:fs/promises'
import { TailBuffer } from './tail-buffer.js'

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

export interface ReapOptions {
  /** After closing stdin, how long the child may take to exit on its own. */
  stdinGraceMs: number
  /** After SIGTERM, how long the group may take to exit before SIGKILL. */
  termGraceMs: number
}

/** How much stderr a diagnostic quotes. */
export const STDERR_TAIL_CHARS = 2000
/** After SIGKILL, how long to wait before calling the tree unkillable. */
const KILL_WAIT_MS = 5000
const POLL_MS = 20

export function describeExit(exit: ExitInfo): string {
  return exit.signal ? `was killed by ${exit.signal}` : `exited with code ${exit.code}`
}

export class ProcessTree {
  readonly child: ChildProcess
  /** Resolves once the child runs; rejects with the spawn error (ENOENT, EACCES, a bad cwd, …). */
  readonly spawned: Promise<void>
  /** Resolves when the leader has exited (never, if it never started). */
  readonly exited: Promise<ExitInfo>
  private exitInfo: ExitInfo | undefined
  private readonly stderrTail = new TailBuffer(STDERR_TAIL_CHARS)
  private readonly stderrEnded: Promise<void>
  private reaping: Promise<void> | undefined

  constructor(spec: SpawnSpec) {
    this.child = spawn(spec.command, [...spec.args], {
      cwd: spec.cwd,
      env: spec.env,
      stdio: ['pipe', 'pipe', 'pipe'],
      detached: true,
      windowsHide: true,
    })
    const { child } = this
    this.spawned = new Promise<void>((resolve, reject) => {
      child.once('spawn', resolve)
      child.once('error', reject)
    })
    // Observed by `start`; this keeps an early spawn error from surfacing as unhandled.
    this.spawned.catch(() => {})
    this.exited = new Promise<ExitInfo>((resolve) => {
      child.once('exit', (code, signal) => {
        this.exitInfo = { code, signal }
        resolve(this.exitInfo)
      })
    })
    // Writing to a child that has died fails with EPIPE; the exit watcher reports the
    // death with its code, so the write error itself carries nothing more.
    child.stdin!.on('error', () => {})
    child.stderr!.setEncoding('utf8')
    child.stderr!.on('data', (chunk: string) => this.stderrTail.push(chunk))
    this.stderrEnded = new Promise<void>((resolve) => {
      child.stderr!.once('close', resolve)
      child.stderr!.once('error', () => resolve())
    })
  }

  get pid(): number | undefined {
    return this.child.pid
  }

  /** How the leader ended, once it has. */
  get exit(): ExitInfo | undefined {
    return this.exitInfo
  }

  /** The last lines the child wrote to stderr (bounded). */
  stderr(): string {
    return this.stderrTail.toString()
  }

  /**
   * The exit, if it happens within `ms`, after letting stderr drain briefly so a
   * diagnostic quotes the child's last words.
   */
  async exitWithin(ms: number): Promise<ExitInfo | undefined> {
    const exit = this.exitInfo ?? (await raceTimeout(this.exited, ms))
    if (exit) await raceTimeout(this.stderrEnded, 200)
    return exit
  }

  /** Close stdin → grace → SIGTERM → grace → SIGKILL. Idempotent; every caller shares one reaping. */
  reap(options: ReapOptions): Promise<void> {
    this.reaping ??= this.runReap(options)
    return this.reaping
  }

  private async runReap(options: ReapOptions): Promise<void> {
    try {
      if (this.pid === undefined) return
      this.child.stdin!.end()
      if (await this.waitGone(options.stdinGraceMs)) return
      this.signalGroup('SIGTERM')
      if (await this.waitGone(options.termGraceMs)) return
      this.signalGroup('SIGKILL')
      if (await this.waitGone(KILL_WAIT_MS)) return
      throw new Error(`process group ${this.pid} (${this.child.spawnfile}) still has live processes ${KILL_WAIT_MS} ms after SIGKILL`)
    } finally {
      // Our ends of the pipes: a grandchild that escaped the group could hold the other
      // ends open forever, so do not wait for them to close by themselves.
      this.child.stdin?.destroy()
      this.child.stdout?.destroy()
      this.child.stderr?.destroy()
    }
  }

  private signalGroup(signal: NodeJS.Signals): void {
    try {
      process.kill(-this.pid!, signal)
    } catch (error) {
      // ESRCH: the group is already empty. Anything else (EPERM) is left for waitGone to report.
      if ((error as NodeJS.ErrnoException).code !== 'ESRCH') throw error
    }
  }

  /** True once the leader has exited and its group has no live member, within `ms`. */
  private async waitGone(ms: number): Promise<boolean> {
    const deadline = Date.now() + ms
    for (;;) {
      if (this.exitInfo && !(await groupHasLiveMembers(this.pid!))) return true
      if (Date.now() >= deadline) return false
      await delay(POLL_MS)
    }
  }
}

/**
 * `kill(-pgid, 0)` says whether the group still exists, but it also counts zombies: a
 * killed grandchild that was re-parented to an init that does not reap (common in
 * containers) stays a zombie forever, though it is dead. Where `/proc` exists, count
 * only members that are not zombies.
 */
export async function groupHasLiveMembers(pgid: number): Promise<boolean> {
  try {
    process.kill(-pgid, 0)
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ESRCH') return false
    return true
  }
  const members = await liveGroupMembers(pgid)
  return members === undefined || members.length > 0
}

/** Pids of the group's non-zombie members, from `/proc`; `undefined` where there is no `/proc`. */
export async function liveGroupMembers(pgid: number): Promise<number[] | undefined> {
  let entries: string[]
  try {
    entries = await readdir('/proc')
  } catch {
    // No /proc (not Linux): the caller falls back to kill(-pgid, 0) alone.
    return undefined
  }
  const pids = entries.filter((name) => /^\d+$/.test(name))
  const states = await Promise.all(pids.map((pid) => processState(Number(pid))))
  return pids.map(Number).filter((_, index) => {
    const state = states[index]
    return state !== undefined && state.pgid === pgid && state.state !== 'Z' && state.state !== 'X'
  })
}

/** State letter and process group of one process, or `undefined` when it is gone. */
export async function processState(pid: number): Promise<{ state: string; pgid: number } | undefined> {
  let stat: string
  try {
    stat = await readFile(`/proc/${pid}/stat`, 'utf8')
  } catch {
    // The process exited between readdir and here.
    return undefined
  }
  // `pid (comm) state ppid pgrp …`; comm may itself contain spaces and parentheses.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
  return { state: fields[0], pgid: Number(fields[2]) }
}

function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms))
}

async function raceTimeout<T>(promise: Promise<T>, ms: number): Promise<T | undefined> {
  let timer: NodeJS.Timeout | undefined
  try {
    return await Promise.race([promise, new Promise<undefined>((resolve) => (timer = setTimeout(() => resolve(undefined), ms)))])
  } finally {
    clearTimeout(timer)
  }
}
