/**
 * A bestOf check: one shell command run in an attempt's workspace, bounded by a timeout
 * after which its whole process tree is stopped. Exit 0 passes.
 *
 * The command is the user's own (the workflow file's), but what it runs is code a model
 * wrote (`sh test.sh`, `npm test` over the attempt's package.json), which the attempt itself
 * may not have been allowed to run. So by default it runs as a sandboxed bash command
 * does (`@dsh/bash`'s bubblewrap sandbox): only the workspace writable (its git data
 * read-only), no network. Where the machine cannot make a sandbox the bestOf call is
 * refused before any attempt starts, unless the workflow says `check: { command, sandbox: false }`.
 */
import { readFileSync } from 'node:fs'
import { dirname, isAbsolute, join, resolve } from 'node:path'
import { LocalBashExecutor, sandboxProblem, type BashExit, type BashSandbox } from '@dsh/bash'
import { WorkflowError } from './errors.js'

export interface CheckOutcome {
  passed: boolean
  /** `exited with code 1`, `was killed by SIGKILL`, `timed out after N ms`, `could not start: …`. */
  how: string
  timedOut: boolean
  /** The last characters of what it printed (stdout and stderr). */
  output: string
}

/** What `bestOf`'s `check` option may be: a command, or a command and whether to confine it. */
export type CheckOption = string | { command: string; sandbox?: boolean }

export interface CheckSpec {
  command: string
  /** Run in bubblewrap's sandbox (the default); false only when the workflow says so. */
  sandbox: boolean
}

const OUTPUT_CHARS = 2000

/** The check a `bestOf` call gives, validated; throws `INVALID_CALL` for a malformed one, or a sandboxed one this machine cannot confine. */
export function checkOf(option: CheckOption | undefined): CheckSpec | undefined {
  if (option === undefined) return undefined
  const spec = typeof option === 'string' ? { command: option, sandbox: true } : typeof option === 'object' && option !== null ? { command: option.command, sandbox: option.sandbox ?? true } : undefined
  if (spec === undefined || typeof spec.command !== 'string' || spec.command.trim() === '' || typeof spec.sandbox !== 'boolean') {
    throw new WorkflowError('INVALID_CALL', 'bestOf(): check is a shell command (a non-empty string), or { command, sandbox: false } to run it unconfined')
  }
  if (spec.sandbox) {
    const problem = sandboxProblem()
    if (problem !== undefined) {
      throw new WorkflowError('INVALID_CALL', `bestOf(): the check \`${spec.command}\` runs over code a model wrote, so it runs sandboxed, and ${problem}; to run it unconfined anyway give check: { command, sandbox: false }`)
    }
  }
  return spec
}

export async function runCheck(check: CheckSpec, cwd: string, timeoutMs: number, signal: AbortSignal): Promise<CheckOutcome> {
  // One executor per check: nothing of it outlives the call (the executor tracks only this process).
  const executor = new LocalBashExecutor({ killGraceMs: 1000, maxOutputChars: OUTPUT_CHARS * 4 })
  let exit: BashExit
  let printed: string
  try {
    const running = executor.start({ command: check.command, cwd, timeoutMs, signal, ...(check.sandbox && { sandbox: sandboxOf(cwd) }) })
    exit = await running.exited
    printed = running.output().trim().slice(-OUTPUT_CHARS)
  } catch (error) {
    return { passed: false, how: `could not start: ${(error as Error).message}`, timedOut: false, output: '' }
  }
  if (exit.error !== undefined) return { passed: false, how: `could not start: ${exit.error}`, timedOut: false, output: printed }
  if (exit.timedOut) return { passed: false, how: `timed out after ${timeoutMs} ms (its processes were stopped)`, timedOut: true, output: printed }
  if (exit.stopped || signal.aborted) return { passed: false, how: 'was cancelled with the workflow', timedOut: false, output: printed }
  return { passed: exit.exitCode === 0, how: exit.signal !== null ? `was killed by ${exit.signal}` : `exited with code ${exit.exitCode}`, timedOut: false, output: printed }
}

/**
 * The workspace writable, nothing else; a worktree's repository git directory stays
 * visible read-only (it may be under /tmp, which the sandbox replaces), as for an
 * attempt's own sandboxed commands (`@dsh/tool-bash`'s `sandboxFor`).
 */
function sandboxOf(workspace: string): BashSandbox {
  const sandbox: BashSandbox = { writable: [workspace], network: false }
  const gitDir = worktreeGitDir(workspace)
  if (gitDir !== undefined) sandbox.readable = [gitDir]
  return sandbox
}

/** A worktree's `.git` file names `<repository git dir>/worktrees/<name>`: the repository's git dir, or undefined for anything else. */
function worktreeGitDir(workspace: string): string | undefined {
  try {
    const line = /^gitdir: (.+)$/m.exec(readFileSync(join(workspace, '.git'), 'utf8'))?.[1]?.trim()
    if (line === undefined) return undefined
    const own = isAbsolute(line) ? line : resolve(workspace, line)
    return dirname(dirname(own))
  } catch {
    return undefined
  }
}
