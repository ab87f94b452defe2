/**
 * The Claude Code process of one run, spawned by us (through the SDK's
 * `spawnClaudeCodeProcess` hook) rather than by the SDK, so that we know its pid, start
 * it as the leader of its own process group, keep its stderr and exit status for
 * diagnostics, and can end its whole tree on disposal.
 */
import { spawn, type ChildProcess } from 'node:child_process'
import type { SpawnedProcess, SpawnOptions } from '@anthropic-ai/claude-agent-sdk'
import { isAlive, processTree, signalTree, waitGone } from './process-tree.js'

/** How the process ended: an exit code, a signal, or a failure to spawn at all. */
export interface ProcessExit {
  code: number | null
  signal: NodeJS.Signals | null
  /** Set when the process could not be started (e.g. ENOENT, EACCES). */
  spawnError?: Error
}

/** Keep this much of the end of stderr: enough for the error Claude Code prints, bounded for a chatty child. */
const STDERR_TAIL = 4096
/** How long SIGKILL may take to show before disposal gives up and reports it. */
const KILL_WAIT_MS = 5_000

export class ClaudeProcess {
  private child: ChildProcess | undefined
  private stderr = ''
  private exitInfo: ProcessExit | undefined
  private readonly exitWaiters: ((exit: ProcessExit) => void)[] = []
  private disposal: Promise<void> | undefined

  /** The child's pid once spawned (it is also its process group id). */
  get pid(): number | undefined {
    return this.child?.pid
  }

  get spawned(): boolean {
    return this.child !== undefined
  }

  /** How the process ended, once it has. */
  get exit(): ProcessExit | undefined {
    return this.exitInfo
  }

  /** Resolves when the process has exited (or failed to spawn). */
  exited(): Promise<ProcessExit> {
    if (this.exitInfo) return Promise.resolve(this.exitInfo)
    return new Promise((resolve) => this.exitWaiters.push(resolve))
  }

  /** The last few KB of stderr, trimmed. */
  stderrTail(): string {
    return this.stderr.trim()
  }

  /**
   * The SDK's spawn hook. Detached makes the child a process group leader. The SDK's
   * forwarded abort signal is deliberately not passed to `spawn`: disposal owns the
   * kill sequence (and reaps the whole group, which a plain `child.kill()` would not).
   */
  readonly spawn = (options: SpawnOptions): SpawnedProcess => {
    if (this.child) throw new Error('a ClaudeProcess spawns once')
    const child = spawn(options.command, options.args, {
      cwd: options.cwd,
      env: definedOnly(options.env),
      stdio: ['pipe', 'pipe', 'pipe'],
      detached: true,
      windowsHide: true,
    })
    this.child = child
    child.stderr?.setEncoding('utf8')
    child.stderr?.on('data', (piece: string) => {
      this.stderr = (this.stderr + piece).slice(-STDERR_TAIL)
    })
    child.on('exit', (code, signal) => this.settleExit({ code, signal }))
    child.on('error', (error) => {
      // `error` without a pid is a failed spawn; with one it is a failed kill/write, not an exit.
      if (child.pid === undefined) this.settleExit({ code: null, signal: null, spawnError: error })
    })
    return child as SpawnedProcess
  }

  /**
   * End the process tree and resolve once it is gone: close stdin (Claude Code exits on
   * end of input), wait `graceMs`, SIGTERM the group and every known descendant, wait
   * `graceMs` again, then SIGKILL. Idempotent. Rejects only when processes survive SIGKILL.
   */
  dispose(graceMs: number): Promise<void> {
    this.disposal ??= this.reap(graceMs)
    return this.disposal
  }

  private async reap(graceMs: number): Promise<void> {
    const child = this.child
    const pgid = child?.pid
    if (!child || pgid === undefined) return
    // Descendants that left the group are found through their parent, so look while it lives.
    const known = new Set(processTree(pgid))
    if (this.exitInfo === undefined) child.stdin?.end()
    if (await waitGone(pgid, known, graceMs)) return this.settled()
    for (const pid of processTree(pgid)) known.add(pid)
    signalTree(pgid, known, 'SIGTERM')
    if (await waitGone(pgid, known, graceMs)) return this.settled()
    for (const pid of processTree(pgid)) known.add(pid)
    signalTree(pgid, known, 'SIGKILL')
    if (await waitGone(pgid, known, KILL_WAIT_MS)) return this.settled()
    const survivors = [...known].filter(isAlive)
    throw new Error(`the Claude Code process tree (group ${pgid}) did not exit after SIGKILL; still alive: ${survivors.join(', ') || `group ${pgid}`}`)
  }

  /** The tree is gone; wait for Node to report our own child's exit so `exit` is filled in. */
  private async settled(): Promise<void> {
    await this.exited()
  }

  private settleExit(exit: ProcessExit): void {
    if (this.exitInfo) return
    this.exitInfo = exit
    for (const resolve of this.exitWaiters.splice(0)) resolve(exit)
  }
}

/** Node's `spawn` wants string values; the SDK's env type allows `undefined` for unset. */
function definedOnly(env: Record<string, string | undefined>): Record<string, string> {
  const out: Record<string, string> = {}
  for (const [name, value] of Object.entries(env)) if (value !== undefined) out[name] = value
  return out
}

/** A one-line description of how the process ended, for diagnostics. */
export function describeExit(exit: ProcessExit | undefined): string {
  if (!exit) return 'the process had not exited'
  if (exit.spawnError) return `the process could not be started: ${exit.spawnError.message}`
  if (exit.signal) return `the process was killed by ${exit.signal}`
  return `the process exited with code ${exit.code}`
}
