/**
 * Running git: the one way this package talks to it. Arguments are passed as a list (no
 * shell), so paths with spaces or newlines are safe; output is bounded; a failure is a
 * `WorkspaceError` carrying git's own words (its last lines of stderr).
 */
import { execFile } from 'node:child_process'
import { WorkspaceError } from './errors.js'

/** Longest any one git command may take. */
const GIT_TIMEOUT_MS = 60_000
const MAX_OUTPUT = 16 * 1024 * 1024

export interface GitResult {
  stdout: string
  stderr: string
  code: number
}


/** Run `git args` in `cwd`; resolves with its exit code (never rejects for a non-zero exit). */
export function gitResult(cwd: string, args: readonly string[], options: { input?: string; env?: NodeJS.ProcessEnv } = {}): Promise<GitResult> {
  return new Promise((resolve, reject) => {
    const child = execFile(
      'git',
      [...args],
      // No pager, no prompts, no editor: git must never wait for a person here.
      { cwd, timeout: GIT_TIMEOUT_MS, maxBuffer: MAX_OUTPUT, env: { ...process.env, GIT_TERMINAL_PROMPT: '0', GIT_PAGER: 'cat', GIT_EDITOR: 'true', LC_ALL: 'C', ...options.env } },
      (error, stdout, stderr) => {
        if (error && typeof (error as { code?: unknown }).code !== 'number') {
          const spawnError = error as NodeJS.ErrnoException
          if (spawnError.code === 'ENOENT') return reject(new WorkspaceError('NO_GIT', `git cannot be run in ${cwd}: ${spawnError.code === 'ENOENT' && !(spawnError.path ?? '').includes('/') ? 'git is not installed (or the directory is gone)' : spawnError.message}`))
          return reject(new WorkspaceError('GIT_FAILED', `git ${args[0]} did not finish: ${spawnError.message}`))
        }
        resolve({ stdout: String(stdout), stderr: String(stderr), code: error ? Number((error as { code?: unknown }).code) : 0 })
      },
    )
    if (options.input !== undefined) child.stdin?.end(options.input)
  })
}

/** Run `git args` in `cwd`; its stdout, or a `WorkspaceError` saying what git said. */
export async function git(cwd: string, args: readonly string[], what: string): Promise<string> {
  const result = await gitResult(cwd, args)
  if (result.code !== 0) throw new WorkspaceError('GIT_FAILED', `${what}: git ${args.slice(0, 2).join(' ')} failed: ${lastLines(result.stderr || result.stdout)}`)
  return result.stdout
}

/** The last few lines of git's words, on one line. */
export function lastLines(text: string): string {
  const lines = text.trim().split('\n').filter((line) => line.trim() !== '')
  return lines.slice(-3).join(' / ').slice(0, 500) || '(no message)'
}

/**
 * The environment of a commit dsh makes itself (a child's uncommitted work, a copy's
 * starting point): the user's own git identity when one is configured, else dsh's.
 */
export async function commitEnvironment(cwd: string, at: readonly string[] = []): Promise<NodeJS.ProcessEnv> {
  const configured = await gitResult(cwd, [...at, 'config', '--get', 'user.email'])
  if (configured.code === 0 && configured.stdout.trim() !== '') return {}
  return { GIT_AUTHOR_NAME: 'dsh', GIT_AUTHOR_EMAIL: 'dsh@localhost', GIT_COMMITTER_NAME: 'dsh', GIT_COMMITTER_EMAIL: 'dsh@localhost' }
}

/**
 * Run `git at… args` in `cwd` as a commit of dsh's own (see `commitEnvironment`); `at`
 * addresses the repository (`gitArgs`), for the identity it reads too.
 */
export async function gitCommit(cwd: string, at: readonly string[], args: readonly string[], what: string): Promise<string> {
  const env = await commitEnvironment(cwd, at)
  const result = await gitResult(cwd, [...at, ...args], { env })
  if (result.code !== 0) throw new WorkspaceError('GIT_FAILED', `${what}: git ${args.slice(0, 2).join(' ')} failed: ${lastLines(result.stderr || result.stdout)}`)
  return result.stdout
}
