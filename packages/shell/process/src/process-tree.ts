/**
 * One child process and everything it starts, as a unit that can be reaped.
 *
 * The child is spawned `detached`, which makes it the leader of a new process group
 * (pgid = its pid), so one signal to `-pid` reaches a shell wrapper, a tool it runs, a
 * grandchild that inherited its stdout. A descendant that moved to a group or session of
 * its own (`setsid`, a command run in a PTY) is found by following parent links in
 * `/proc` and remembered with its start time, so it is reaped too, even after the
 * process between it and the tree has gone. `reap()` is the one way the tree ends.
 */
import type { ChildProcess } from 'node:child_process'
import { DshError } from '@dsh/base'
import { goneWithin, KILL_WAIT_MS, signalGroup, signalProcess, terminate, type StopSignal } from './process-group.js'
import { exists, isLive, readProcessTable, type ProcessEntry } from './process-liveness.js'
import { trackGroup } from './live-groups.js'
import { TailBuffer } from './tail-buffer.js'

export interface ExitInfo {
  code: number | null
  signal: NodeJS.Signals | null
}

export interface SpawnSpec {
  command: string
  args: readonly string[]
  /** Default: this process's cwd. */
  cwd?: string
  env: NodeJS.ProcessEnv
  /** How many characters of stderr `stderr()` keeps; default `DEFAULT_STDERR_TAIL_CHARS`. */
  stderrTailChars?: number
}

export interface ReapOptions {
  /** After closing stdin, how long the child may take to exit on its own. */
  stdinGraceMs: number
  /** After SIGTERM, how long the tree may take to exit before SIGKILL. */
  termGraceMs: number
}

export const DEFAULT_STDERR_TAIL_CHARS = 4096
/** After the leader exits, how long its stderr may take to end before a diagnostic quotes what came. */
const STDERR_DRAIN_MS = 200

/** `exited with code 3` / `was killed by SIGKILL`, to follow the name of the program. */
export function describeExit(exit: ExitInfo): string {
  return exit.signal ? `was killed by ${exit.signal}` : `exited with code ${exit.code}`
}

export type ReapErrorCode =
  /** Something in the tree outlived SIGKILL (a process in uninterruptible sleep, or one we may not signal). */
  'SURVIVED_SIGKILL'

export class ReapError extends DshError<ReapErrorCode> {
  constructor(
    readonly pgid: number,
    /** The pids still running, when `/proc` could say which. */
    readonly survivors: readonly number[],
    command: string,
  ) {
    super(
      'SURVIVED_SIGKILL',
      `the process tree of ${command} (group ${pgid}) still has live processes ${KILL_WAIT_MS} ms after SIGKILL: ${survivors.length ? survivors.join(', ') : `group ${pgid}`}; they may be stuck in the kernel (state D): check them with ps`,
    )
  }
}

export class ProcessTree {
  readonly child: ChildProcess
  /** Resolves once the child runs; rejects with the spawn error (ENOENT, EACCES, a missing cwd, …). */
  readonly spawned: Promise<void>
  /** Resolves when the leader has exited (never, if it never started). */
  readonly exited: Promise<ExitInfo>
  private exitInfo: ExitInfo | undefined
  private readonly stderrTail: TailBuffer
  private readonly stderrEnded: Promise<void>
  /** Every process seen in the tree, pid → start time (a pid reused later names another process). */
  private readonly members = new Map<number, number>()
  private reaping: Promise<void> | undefined
  private untrack: () => void = () => {}

  constructor(spec: SpawnSpec) {
    // node:child_process is loaded here, on the first spawn, not with this module: it costs
    // every dsh start about 2 ms, and a run that starts no process never needs it.
    this.child = process.getBuiltinModule('node:child_process').spawn(spec.command, [...spec.args], {
      cwd: spec.cwd,
      env: spec.env,
      stdio: ['pipe', 'pipe', 'pipe'],
      detached: true,
      windowsHide: true,
    })
    const { child } = this
    // Until reaped, the group is killed if this process exits abruptly (see live-groups).
    if (child.pid !== undefined) this.untrack = trackGroup(child.pid)
    this.spawned = new Promise<void>((resolve, reject) => {
      child.once('spawn', resolve)
      // Before `spawn`, an error is the spawn failing. After it, it is a failed kill() or
      // send() by whoever holds the child; the exit watcher reports what matters, and
      // the listener stays so that such an error is never unhandled.
      child.on('error', reject)
    })
    // Observed by the caller's startup; this keeps an early spawn error from being unhandled.
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
    this.stderrTail = new TailBuffer(spec.stderrTailChars ?? DEFAULT_STDERR_TAIL_CHARS)
    child.stderr!.setEncoding('utf8')
    child.stderr!.on('data', (chunk: string) => this.stderrTail.push(chunk))
    this.stderrEnded = new Promise<void>((resolve) => {
      child.stderr!.once('close', resolve)
      child.stderr!.once('error', () => resolve())
    })
  }

  /** The leader's pid, which is also the process group id; `undefined` if it never started. */
  get pid(): number | undefined {
    return this.child.pid
  }

  /** How the leader ended, once it has. */
  get exit(): ExitInfo | undefined {
    return this.exitInfo
  }

  /** The end of what the child wrote to stderr: trimmed, bounded, `…` where the start was cut. */
  stderr(): string {
    return this.stderrTail.toString()
  }

  /**
   * The exit, if it happens within `ms`, after letting stderr drain briefly so a
   * diagnostic quotes the child's last words.
   */
  async exitWithin(ms: number): Promise<ExitInfo | undefined> {
    const exit = this.exitInfo ?? (await within(this.exited, ms))
    if (exit) await within(this.stderrEnded, STDERR_DRAIN_MS)
    return exit
  }

  /**
   * Close stdin → `stdinGraceMs` → SIGTERM → `termGraceMs` → SIGKILL, each signal sent to
   * the group and to every member that left it. Resolves once the leader has exited and
   * nothing of the tree runs (zombies count as gone); rejects with `ReapError` only if
   * something survives SIGKILL. Idempotent: every caller shares one reaping.
   */
  reap(options: ReapOptions): Promise<void> {
    this.reaping ??= this.runReap(options)
    return this.reaping
  }

  private async runReap(options: ReapOptions): Promise<void> {
    const pgid = this.pid
    try {
      if (pgid === undefined) return
      // Members that left the group are found through their parents: look before the
      // leader, having lost its stdin, exits and orphans them.
      await this.liveMembers()
      this.child.stdin!.end()
      // Most children exit promptly once their input ends: wait for that exit itself, not
      // for the next poll, so releasing a finished child costs its shutdown and no more.
      const graceEnds = Date.now() + options.stdinGraceMs
      await within(this.exited, options.stdinGraceMs)
      if (await goneWithin(() => this.alive(), Math.max(0, graceEnds - Date.now()))) return this.untrack()
      if (await terminate({ signal: (signal) => this.signal(signal), alive: () => this.alive() }, options.termGraceMs)) return this.untrack()
      const survivors = (await this.liveMembers())?.map((entry) => entry.pid) ?? []
      throw new ReapError(pgid, survivors, this.child.spawnfile)
    } finally {
      // Our ends of the pipes: a descendant that escaped could hold the other ends open
      // forever, so do not wait for them to close by themselves.
      this.child.stdin?.destroy()
      this.child.stdout?.destroy()
      this.child.stderr?.destroy()
    }
  }

  private async signal(signal: StopSignal): Promise<void> {
    const pgid = this.pid!
    const live = await this.liveMembers()
    signalGroup(pgid, signal)
    for (const entry of live ?? []) if (entry.pgid !== pgid) signalProcess(entry.pid, signal)
  }

  /** True until the leader has exited and no member of the tree runs. */
  private async alive(): Promise<boolean> {
    if (!this.exitInfo) return true
    const live = await this.liveMembers()
    // No /proc: the group probe is all there is (it counts zombies too).
    return live === undefined ? exists(-this.pid!) : live.length > 0
  }

  /**
   * One look at `/proc`: remembers every descendant of the leader (until it exits), of a
   * group member and of a remembered member, then returns the live processes among the
   * group and the remembered. `undefined` where there is no `/proc`.
   */
  private async liveMembers(): Promise<ProcessEntry[] | undefined> {
    const table = await readProcessTable()
    if (!table) return undefined
    const pgid = this.pid!
    const inTree = (entry: ProcessEntry) => entry.pgid === pgid || this.members.get(entry.pid) === entry.startTime
    const children = new Map<number, ProcessEntry[]>()
    for (const entry of table.values()) children.set(entry.ppid, [...(children.get(entry.ppid) ?? []), entry])
    const queue = [...table.values()].filter((entry) => inTree(entry) || (entry.pid === pgid && !this.exitInfo))
    for (let entry = queue.shift(); entry !== undefined; entry = queue.shift()) {
      this.members.set(entry.pid, entry.startTime)
      for (const child of children.get(entry.pid) ?? []) if (this.members.get(child.pid) !== child.startTime) queue.push(child)
    }
    return [...table.values()].filter((entry) => isLive(entry) && inTree(entry))
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
