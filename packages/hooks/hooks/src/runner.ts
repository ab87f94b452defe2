/**
 * Running one hook command: `sh -c` in its own process group, in the agent's directory,
 * with the allow-listed environment of `@dsh/process` (never dsh's credentials), the event's
 * JSON on standard input, its output bounded, and the whole group stopped at its timeout or
 * once the command exits (a hook that forks and exits leaves nothing behind).
 */
import { spawn } from 'node:child_process'
import { childEnvironment, terminateGroup, trackGroup } from '@dsh/process'

/** Output kept per stream: a hook's answer is small; more is cut with a note. */
export const MAX_HOOK_OUTPUT_CHARS = 64 * 1024
/** SIGTERM → this → SIGKILL, when a hook's group is stopped. */
const GRACE_MS = 500
/**
 * After the hook's `sh` exits, how long its pipes may still drain before they are destroyed.
 * A descendant that left the group (`setsid …`) can hold them open forever, which would keep
 * `close` — and so the tool call and dsh's exit — waiting; its output past this is dropped.
 */
const PIPE_DRAIN_MS = 150

export interface HookRun {
  /** The exit code; `undefined` when the command did not exit by itself (killed, or never started). */
  exitCode?: number
  stdout: string
  stderr: string
  /** Stopped at its timeout. */
  timedOut: boolean
  /** Some output was past `MAX_HOOK_OUTPUT_CHARS` and was dropped. */
  truncated: boolean
  /** It could not be started. */
  failed?: string
}

export interface HookRunOptions {
  cwd: string
  timeoutMs: number
  /** Named variables of dsh's environment the hook also gets (besides the allow-listed base). */
  passEnv?: readonly string[]
  signal?: AbortSignal
}

export function runHookCommand(command: string, input: unknown, options: HookRunOptions): Promise<HookRun> {
  return new Promise((resolve) => {
    const out = new Bounded()
    const err = new Bounded()
    let timedOut = false
    let child: ReturnType<typeof spawn>
    try {
      child = spawn('/bin/sh', ['-c', command], {
        cwd: options.cwd,
        env: childEnvironment(process.env, { ...(options.passEnv && { passEnv: options.passEnv }) }),
        detached: true,
        stdio: ['pipe', 'pipe', 'pipe'],
      })
    } catch (error) {
      resolve({ stdout: '', stderr: '', timedOut: false, truncated: false, failed: (error as Error).message })
      return
    }
    const pgid = child.pid
    const untrack = pgid === undefined ? () => {} : trackGroup(pgid)
    let stopping: Promise<boolean> | undefined
    const stopGroup = () => (stopping ??= pgid === undefined ? Promise.resolve(true) : terminateGroup(pgid, GRACE_MS).catch(() => false))
    const timer = setTimeout(() => {
      timedOut = true
      void stopGroup()
    }, options.timeoutMs)
    const onAbort = () => void stopGroup()
    options.signal?.addEventListener('abort', onAbort, { once: true })
    child.stdout!.setEncoding('utf8').on('data', (chunk: string) => out.push(chunk))
    child.stderr!.setEncoding('utf8').on('data', (chunk: string) => err.push(chunk))
    // A hook that does not read its input closes the pipe early: not an error of the hook.
    child.stdin!.on('error', () => {})
    child.stdin!.end(JSON.stringify(input))
    let exitCode: number | undefined
    let settled = false
    const finish = (failed?: string) => {
      if (settled) return
      settled = true
      clearTimeout(timer)
      options.signal?.removeEventListener('abort', onAbort)
      // Whatever the hook left running in its group goes with it, before the run is reported.
      void stopGroup().finally(() => {
        untrack()
        resolve({
          ...(exitCode !== undefined && !timedOut && { exitCode }),
          stdout: out.text,
          stderr: err.text,
          timedOut,
          truncated: out.dropped || err.dropped,
          ...(failed !== undefined && { failed }),
        })
      })
    }
    child.on('error', (error) => finish(error.message))
    // On exit (by itself or killed at the timeout) the group is stopped at once, and the pipes get
    // a short drain: a descendant outside the group holding them open would otherwise keep `close` away.
    let drain: ReturnType<typeof setTimeout> | undefined
    child.on('exit', (code) => {
      if (code !== null) exitCode = code
      void stopGroup()
      drain = setTimeout(() => {
        child.stdout!.destroy()
        child.stderr!.destroy()
        finish()
      }, PIPE_DRAIN_MS)
    })
    child.on('close', () => {
      clearTimeout(drain)
      finish()
    })
  })
}

/** The first `MAX_HOOK_OUTPUT_CHARS` of a stream; the rest is counted as dropped, never held. */
class Bounded {
  text = ''
  dropped = false

  push(chunk: string): void {
    const room = MAX_HOOK_OUTPUT_CHARS - this.text.length
    if (chunk.length > room) this.dropped = true
    if (room > 0) this.text += chunk.slice(0, room)
  }
}
