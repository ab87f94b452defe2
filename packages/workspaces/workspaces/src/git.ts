/**
 * Running git: the one way this package talks to it. Arguments are passed as a list (no
 * shell), so paths with spaces or newlines are safe; output is bounded; a failure is a
 * `WorkspaceError` carrying git's own words (its last lines of stderr).
 *
 * dsh's git runs unconfined, in repositories and worktrees that confined children work in,
 * so it never runs a program that a repository, a worktree or a child could name: see
 * `hardenedEnvironment` (what it reads and sees) and `driverOverrides` (what it turns off).
 */
import { execFile } from 'node:child_process'
import { statSync } from 'node:fs'
import { WorkspaceError } from './errors.js'

/** Longest any one git command may take. */
const GIT_TIMEOUT_MS = 60_000
const MAX_OUTPUT = 16 * 1024 * 1024

export interface GitResult {
  stdout: string
  stderr: string
  code: number
}

/**
 * Settings every git command of dsh's own runs with, whatever any config file says: each
 * turns off a way git runs a program or reaches past the repository. Hooks (a worktree's
 * `post-checkout`, a commit's), the file-system monitor (`status`), signing (`gpg.program`),
 * credential helpers, an external diff, submodule recursion (a nested repository's own
 * config, which a child wrote, would run), transports (dsh never fetches or pushes), and
 * background maintenance that would outlive the command.
 */
const FIXED_SETTINGS: ReadonlyArray<readonly [string, string]> = [
  ['core.hooksPath', '/dev/null'],
  ['core.fsmonitor', 'false'],
  ['core.attributesFile', '/dev/null'],
  ['core.pager', 'cat'],
  ['core.editor', 'true'],
  ['sequence.editor', 'true'],
  ['core.askPass', ''],
  ['credential.helper', ''],
  ['diff.external', ''],
  ['commit.gpgSign', 'false'],
  ['tag.gpgSign', 'false'],
  ['merge.verifySignatures', 'false'],
  ['merge.stat', 'false'],
  ['submodule.recurse', 'false'],
  ['diff.ignoreSubmodules', 'dirty'],
  ['status.submoduleSummary', 'false'],
  ['fetch.recurseSubmodules', 'false'],
  ['protocol.allow', 'never'],
  ['gc.auto', '0'],
  ['maintenance.auto', 'false'],
]

/** The variables of dsh's own environment its git sees: never credentials, never another `GIT_*`. */
const PASSED_VARIABLES = ['PATH', 'HOME', 'LANG', 'XDG_CONFIG_HOME'] as const
/** Who a commit of dsh's own is by, when the person running dsh says so in its environment. */
const IDENTITY_VARIABLES = ['GIT_AUTHOR_NAME', 'GIT_AUTHOR_EMAIL', 'GIT_COMMITTER_NAME', 'GIT_COMMITTER_EMAIL'] as const
/** Where the person's own git config is, read for the few settings dsh carries over (`userSettings`). */
const USER_CONFIG_VARIABLES = ['GIT_CONFIG_GLOBAL', 'GIT_CONFIG_SYSTEM', 'GIT_CONFIG_NOSYSTEM'] as const

function passed(names: readonly string[]): Record<string, string> {
  const env: Record<string, string> = {}
  for (const name of names) if (process.env[name] !== undefined) env[name] = process.env[name]!
  return env
}

/**
 * The whole environment of dsh's git: PATH, HOME, LANG and XDG_CONFIG_HOME from dsh's, and
 * dsh's own settings. No system or global config file (`GIT_CONFIG_NOSYSTEM`,
 * `GIT_CONFIG_GLOBAL=/dev/null`): the few settings of the person's own that dsh's git needs
 * are carried over explicitly (`userSettings`). No system attributes file. `settings` go in
 * as command-line config (`GIT_CONFIG_COUNT`), so a key or value is never parsed from an
 * argument. No pager, no prompts, no editor: git must never wait for a person here.
 */
function hardenedEnvironment(settings: ReadonlyArray<readonly [string, string]>, extra: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {
    ...passed(PASSED_VARIABLES),
    LC_ALL: 'C',
    GIT_TERMINAL_PROMPT: '0',
    GIT_PAGER: 'cat',
    GIT_EDITOR: 'true',
    GIT_CONFIG_NOSYSTEM: '1',
    GIT_CONFIG_GLOBAL: '/dev/null',
    GIT_ATTR_NOSYSTEM: '1',
    GIT_CONFIG_COUNT: String(settings.length),
    ...extra,
  }
  settings.forEach(([key, value], index) => {
    env[`GIT_CONFIG_KEY_${index}`] = key
    env[`GIT_CONFIG_VALUE_${index}`] = value
  })
  return env
}

/**
 * Settings that turn off every driver the repository's config names: a filter's commands
 * (run by `status`, `add`, checkout and merge on files the attributes give it: a child writes
 * `.gitattributes`), a diff driver's command and text conversion, and a merge driver (a file
 * it would merge conflicts instead). Config names them by a name of its own, so they are
 * found by listing the config as dsh's git reads it; listing runs nothing.
 */
export function driverOverrides(names: readonly string[]): Array<[string, string]> {
  const overrides: Array<[string, string]> = []
  for (const name of names) {
    const match = /^(filter|diff|merge)\.(.+)\.([^.]+)$/.exec(name)
    if (match === null) continue
    const [, section, driver, key] = match as unknown as [string, string, string, string]
    if (section === 'filter' && ['clean', 'smudge', 'process'].includes(key)) overrides.push([name, ''], [`filter.${driver}.required`, 'false'])
    else if (section === 'diff' && ['command', 'textconv'].includes(key)) overrides.push([name, ''])
    else if (section === 'merge' && key === 'driver') overrides.push([name, 'false'])
  }
  return overrides
}

/**
 * The person's own settings dsh's git keeps although it reads no global config: which
 * repositories owned by others they trust (`safe.directory`, only ever their own list) and
 * the ignore file that says which new files are not theirs to commit (`core.excludesFile`).
 * Read from their global config (reading config runs nothing), again when it changes.
 */
let remembered: { key: string; settings: Array<[string, string]> } | undefined

async function userSettings(): Promise<Array<[string, string]>> {
  const home = process.env.HOME ?? ''
  const xdg = process.env.XDG_CONFIG_HOME ?? `${home}/.config`
  const files = process.env.GIT_CONFIG_GLOBAL !== undefined ? [process.env.GIT_CONFIG_GLOBAL] : [`${home}/.gitconfig`, `${xdg}/git/config`]
  const key = JSON.stringify(files.map((file) => [file, modified(file)]))
  if (remembered?.key === key) return remembered.settings
  const read = await run('/', ['config', '--global', '--includes', '--list', '-z'], { ...passed([...PASSED_VARIABLES, ...USER_CONFIG_VARIABLES]), LC_ALL: 'C' })
  const settings: Array<[string, string]> = []
  for (const entry of read.code === 0 ? read.stdout.split('\0') : []) {
    const newline = entry.indexOf('\n')
    if (newline < 0) continue
    const name = entry.slice(0, newline).toLowerCase()
    const value = entry.slice(newline + 1)
    if (name === 'safe.directory' || name === 'core.excludesfile') settings.push([name, value])
  }
  remembered = { key, settings }
  return settings
}

function modified(file: string): number | undefined {
  try {
    return statSync(file).mtimeMs
  } catch {
    return undefined
  }
}

/**
 * Run `git args` in `cwd` the way dsh's own git always runs (see `hardenedEnvironment`,
 * `FIXED_SETTINGS`, `driverOverrides`); resolves with its exit code (never rejects for a
 * non-zero exit). `env` adds variables of dsh's own (a commit's identity).
 */
export async function gitResult(cwd: string, args: readonly string[], options: { input?: string; env?: NodeJS.ProcessEnv } = {}): Promise<GitResult> {
  const base = [...FIXED_SETTINGS, ...(await userSettings())]
  const addressing = leadingOptions(args)
  if (READS_NO_FILES.has(args[addressing.length] ?? '')) return run(cwd, args, hardenedEnvironment(base, options.env), options.input)
  // The config as this command will read it (the repository's, a worktree's, what those include), for the drivers it names.
  const listed = await run(cwd, [...addressing, 'config', '--list', '--name-only', '-z'], hardenedEnvironment(base))
  // Unread, nothing it names could be turned off: the command does not run.
  if (listed.code !== 0) return listed
  const settings = [...base, ...driverOverrides(listed.stdout.split('\0').filter(Boolean))]
  return run(cwd, args, hardenedEnvironment(settings, options.env), options.input)
}

/**
 * Commands of dsh's that read refs, objects and config but no file of a working tree, so no
 * filter or driver could run: they skip listing the config (a second git process each).
 * Any other command lists it.
 */
const READS_NO_FILES = new Set(['rev-parse', 'rev-list', 'config', 'branch', 'ls-tree', 'init'])

/** The options before the subcommand (`--git-dir=…`, `--work-tree=…`, `-c …`): where the command reads its repository. */
function leadingOptions(args: readonly string[]): string[] {
  const leading: string[] = []
  for (let index = 0; index < args.length && args[index]!.startsWith('-'); index++) {
    leading.push(args[index]!)
    if (args[index] === '-c' || args[index] === '-C') leading.push(args[++index]!)
  }
  return leading
}

function run(cwd: string, args: readonly string[], env: NodeJS.ProcessEnv, input?: string): Promise<GitResult> {
  return new Promise((resolve, reject) => {
    const child = execFile('git', [...args], { cwd, timeout: GIT_TIMEOUT_MS, maxBuffer: MAX_OUTPUT, env }, (error, stdout, stderr) => {
      if (error && typeof (error as { code?: unknown }).code !== 'number') {
        const spawnError = error as NodeJS.ErrnoException
        if (spawnError.code === 'ENOENT') return reject(new WorkspaceError('NO_GIT', `git cannot be run in ${cwd}: ${!(spawnError.path ?? '').includes('/') ? 'git is not installed (or the directory is gone)' : spawnError.message}`))
        return reject(new WorkspaceError('GIT_FAILED', `git ${args[0]} did not finish: ${spawnError.message}`))
      }
      resolve({ stdout: String(stdout), stderr: String(stderr), code: error ? Number((error as { code?: unknown }).code) : 0 })
    })
    if (input !== undefined) child.stdin?.end(input)
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

const DSH_IDENTITY = { GIT_AUTHOR_NAME: 'dsh', GIT_AUTHOR_EMAIL: 'dsh@localhost', GIT_COMMITTER_NAME: 'dsh', GIT_COMMITTER_EMAIL: 'dsh@localhost' }

/**
 * The environment of a commit dsh makes itself (a child's uncommitted work, a copy's
 * starting point): the person's own git identity when one is configured (their
 * `GIT_AUTHOR_*`/`GIT_COMMITTER_*` variables, else `user.name`/`user.email` as their git
 * reads them, the repository's first), else dsh's. Reading config runs nothing, so this one
 * read sees the system and global files that dsh's other commands leave out.
 */
export async function commitEnvironment(cwd: string, at: readonly string[] = []): Promise<NodeJS.ProcessEnv> {
  const readEnv = { ...passed([...PASSED_VARIABLES, ...USER_CONFIG_VARIABLES]), LC_ALL: 'C' }
  const configured = async (key: string) => {
    const read = await run(cwd, [...at, 'config', '--includes', '--get', key], readEnv)
    return read.code === 0 && read.stdout.trim() !== '' ? read.stdout.trim() : undefined
  }
  const [name, email] = [await configured('user.name'), await configured('user.email')]
  const own = passed(IDENTITY_VARIABLES)
  if (email === undefined && own.GIT_AUTHOR_EMAIL === undefined) return { ...DSH_IDENTITY, ...own }
  const who = { name: name ?? 'dsh', email: email ?? own.GIT_AUTHOR_EMAIL! }
  return { GIT_AUTHOR_NAME: who.name, GIT_AUTHOR_EMAIL: who.email, GIT_COMMITTER_NAME: who.name, GIT_COMMITTER_EMAIL: who.email, ...own }
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
