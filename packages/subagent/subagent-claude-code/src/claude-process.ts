/**
 * The Claude Code process of one run, spawned by us (through the SDK's
 * `spawnClaudeCodeProcess` hook) rather than by the SDK, so that it is a `ProcessTree`:
 * we know its pid, it leads its own process group, its stderr and exit status are kept
 * for diagnostics, and disposal reaps everything it started.
 */
import type { SpawnedProcess, SpawnOptions } from '@anthropic-ai/claude-agent-sdk'
import { describeExit as describeTreeExit, ProcessTree, type ExitInfo } from '@dsh/process'

/** How the process ended: an exit code, a signal, or a failure to spawn at all. */
interface ProcessExit extends ExitInfo {
  /** Set when the process could not be started (e.g. ENOENT, EACCES). */
  spawnError?: Error
}

export class ClaudeProcess {
  private tree: ProcessTree | undefined
  private exitInfo: ProcessExit | undefined
  private readonly exitWaiters: ((exit: ProcessExit) => void)[] = []
  private disposal: Promise<void> | undefined

  /** The child's pid once spawned (it is also its process group id). */
  get pid(): number | undefined {
    return this.tree?.pid
  }

  get spawned(): boolean {
    return this.tree !== undefined
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
    return this.tree?.stderr() ?? ''
  }

  /**
   * The SDK's spawn hook. The SDK's forwarded abort signal is deliberately not passed on:
   * disposal owns the kill sequence (and reaps the whole tree, which a plain
   * `child.kill()` would not).
   */
  readonly spawn = (options: SpawnOptions): SpawnedProcess => {
    if (this.tree) throw new Error('a ClaudeProcess spawns once')
    const tree = new ProcessTree({ command: options.command, args: options.args, cwd: options.cwd, env: definedOnly(options.env) })
    this.tree = tree
    tree.spawned.catch((error: Error) => this.settleExit({ code: null, signal: null, spawnError: error }))
    void tree.exited.then((exit) => this.settleExit(exit))
    return tree.child as SpawnedProcess
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
    if (this.tree?.pid === undefined) return
    await this.tree.reap({ stdinGraceMs: graceMs, termGraceMs: graceMs })
    // The tree is gone; make sure `exit` is filled in before disposal resolves.
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
  return `the process ${describeTreeExit(exit)}`
}
