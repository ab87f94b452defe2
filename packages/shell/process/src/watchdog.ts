/**
 * A tiny process that outlives an abrupt death of this one (SIGKILL, a crash, an OOM kill)
 * just long enough to stop the process groups it started. Started lazily, once, when
 * the first group is tracked; told about each group as it is tracked and untracked over a
 * pipe on its stdin. When the pipe closes (this process is gone, however it died; the
 * kernel closes the write end), it sends SIGTERM to every group still tracked, SIGKILL
 * to whatever is left after `WATCHDOG_GRACE_MS`, and exits.
 *
 * It runs in a session of its own (`detached`), so a Ctrl-C in the terminal, meant for
 * dsh, does not reach it, and it is not dsh's child (see `LAUNCHER`); it holds no
 * reference in this process's event loop, so it never keeps dsh alive. The pipe is opened
 * close-on-exec, so no other child of dsh inherits the write end and keeps it waiting.
 */
import type { ChildProcess } from 'node:child_process'
import type { Socket } from 'node:net'
import type { Writable } from 'node:stream'
import { childEnvironment } from './child-environment.js'

/** After SIGTERM, how long the groups get before SIGKILL, once this process is gone. */
export const WATCHDOG_GRACE_MS = 1_000

/**
 * The watchdog's program, plain JavaScript for `node -e`: self-contained, so it runs the
 * same from the sources and from the build. Lines on stdin are `+<pgid>` and `-<pgid>`.
 */
const WATCHDOG_PROGRAM = `
const groups = new Set()
let pending = ''
let reaping = false
process.stdin.setEncoding('utf8')
process.stdin.on('data', (chunk) => {
  pending += chunk
  for (let end = pending.indexOf('\\n'); end >= 0; end = pending.indexOf('\\n')) {
    const line = pending.slice(0, end)
    pending = pending.slice(end + 1)
    const pgid = Number(line.slice(1))
    if (!Number.isSafeInteger(pgid) || pgid <= 1) continue
    if (line[0] === '+') groups.add(pgid)
    else if (line[0] === '-') groups.delete(pgid)
  }
})
const signalAll = (signal) => {
  for (const pgid of groups) {
    try { process.kill(-pgid, signal) } catch (error) { if (error.code === 'ESRCH') groups.delete(pgid) }
  }
}
const reap = () => {
  if (reaping) return
  reaping = true
  signalAll('SIGTERM')
  const deadline = Date.now() + ${WATCHDOG_GRACE_MS}
  const poll = setInterval(() => {
    signalAll(0)
    if (groups.size > 0 && Date.now() < deadline) return
    clearInterval(poll)
    signalAll('SIGKILL')
    process.exit(0)
  }, 50)
}
process.stdin.on('end', reap)
process.stdin.on('close', reap)
process.stdin.on('error', reap)
`

/**
 * Started through `sh`, which puts the watchdog in the background with the pipe (the
 * launcher's fd 3) as its stdin, prints its pid and exits: the watchdog is then nobody's
 * child, so it does not show among dsh's children (which tests and users count to find
 * leaks), and nothing of it is left for dsh to wait for. The pipe is fd 3, not the
 * launcher's stdin, because Node closes a child's stdin when that child exits.
 */
const LAUNCHER = '"$0" -e "$1" <&3 3<&- >/dev/null 2>&1 & echo $!'

/** Our end of the pipe to the watchdog. */
let pipe: Writable | undefined
let pid: number | undefined
/** Set once starting the watchdog failed: there is then no second attempt (see `tellWatchdog`). */
let unavailable = false

/** Tell the watchdog (starting it if need be) that group `pgid` was started (`+`) or is gone (`-`). */
export function tellWatchdog(change: '+' | '-', pgid: number): void {
  if (unavailable) return
  if (change === '-' && !pipe) return
  pipe ??= startWatchdog()
  pipe?.write(`${change}${pgid}\n`)
}

/** The watchdog's pid, once it runs and the launcher has said it (for diagnostics and tests). */
export function watchdogPid(): number | undefined {
  return pid
}

function startWatchdog(): Writable | undefined {
  let launcher: ChildProcess
  try {
    // Loaded on first use, as in process-tree.ts: a start that spawns nothing never loads it.
    launcher = process.getBuiltinModule('node:child_process').spawn('/bin/sh', ['-c', LAUNCHER, process.execPath, WATCHDOG_PROGRAM], {
      detached: true,
      stdio: ['ignore', 'pipe', 'ignore', 'pipe'],
      env: childEnvironment(process.env),
    })
  } catch {
    // Spawning can throw synchronously (EAGAIN, ENOMEM): the groups are then covered only
    // by the exit handler, as before there was a watchdog; nothing else depends on it.
    unavailable = true
    return undefined
  }
  const toWatchdog = launcher.stdio[3] as Socket
  const stdout = launcher.stdout!
  // A watchdog that cannot start, or dies, leaves the exit handler as the only net; its
  // errors (spawn failure, EPIPE on a write after it died) are not this process's failure.
  const lost = () => {
    unavailable = true
    pipe = undefined
  }
  launcher.on('error', lost)
  toWatchdog.on('error', lost)
  let said = ''
  stdout.setEncoding('utf8')
  stdout.on('data', (chunk: string) => {
    said += chunk
    const announced = Number(said.trim())
    if (said.includes('\n') && Number.isSafeInteger(announced) && announced > 0) pid = announced
  })
  // Neither the launcher nor the pipes may keep dsh's event loop alive.
  launcher.unref()
  toWatchdog.unref()
  ;(stdout as Socket).unref()
  return toWatchdog
}
