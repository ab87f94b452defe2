/**
 * Confined runs with bubblewrap (`bwrap`): what the sandbox is made of, whether this
 * machine can make one, and how a sandbox's processes are told apart from outside.
 *
 * A sandboxed command runs as `bwrap <options> -- bash -c <command>`. From outside,
 * bubblewrap's first process (the one we spawn, the leader of our process group) waits for
 * the second, the init of the sandbox's PID namespace, which runs the shell in a session
 * (and process group) of its own. When that init dies the kernel kills everything left in
 * the namespace, and `--die-with-parent` kills the init when the first process dies: so
 * killing our group ends the whole sandbox, whatever the command did inside it.
 */
import { lstatSync, readdirSync, readFileSync, realpathSync } from 'node:fs'
import { dirname, isAbsolute, join, relative, resolve, sep } from 'node:path'
import type { BashSandbox } from './types.js'

/** The program that makes the sandbox, and the Debian package that provides it. */
export const SANDBOX_PROGRAM = 'bwrap'
export const SANDBOX_PACKAGE = 'bubblewrap'

/** bubblewrap writes JSON records on this descriptor: `child-pid` once the sandbox's init exists, `exit-code` when the command ended. */
export const SANDBOX_STATUS_FD = 3

/** How long the start-up probe may take before the machine counts as unable (a stuck namespace set-up). */
const PROBE_TIMEOUT_MS = 10_000

/**
 * bubblewrap's options for one confined command, up to the `--` before the program
 * (`statusFd`: where bubblewrap writes its JSON status records). The
 * order matters: later mounts go on top of earlier ones, so the writable directories are
 * bound after the private `/tmp` (a workspace under `/tmp` stays visible and writable).
 */
export function sandboxArguments(sandbox: BashSandbox, cwd: string, statusFd?: number): string[] {
  const args = [
    // Everything read-only, submounts included, as the user sees it.
    '--ro-bind', '/', '/',
    // A minimal /dev (null, zero, random, tty, a private /dev/shm), not the host's devices.
    '--dev', '/dev',
    // A PID namespace and a /proc that shows only it: no other process, and so no other
    // process's environ, cmdline or memory, dsh's API keys included.
    '--unshare-pid', '--proc', '/proc',
    '--tmpfs', '/tmp',
    // System V shared memory and message queues of other processes stay out of reach.
    '--unshare-ipc',
  ]
  // A network namespace of its own: only a loopback device, on which nothing of the host listens.
  if (!sandbox.network) args.push('--unshare-net')
  // Read-only first, so a writable directory inside a readable one stays writable.
  for (const dir of sandbox.readable ?? []) args.push('--ro-bind-try', dir, dir)
  for (const dir of sandbox.writable) args.push('--bind', dir, dir)
  // After the writable ones, so nothing of the repositories' git data under them is writable.
  for (const path of gitDataWithin(sandbox.writable)) args.push('--ro-bind', path, path)
  args.push(
    // Nothing of the sandbox outlives bubblewrap's first process, which is in our process group.
    '--die-with-parent',
    // No controlling terminal to push input into (TIOCSTI).
    '--new-session',
    // Run as root (a container), bubblewrap keeps every capability for the command unless
    // told otherwise, and with CAP_SYS_ADMIN `mount -o remount,rw /` undoes the read-only
    // file system (measured). Dropped for everyone; an unprivileged user has none anyway.
    '--cap-drop', 'ALL',
    '--chdir', cwd,
  )
  if (statusFd !== undefined) args.push('--json-status-fd', String(statusFd))
  args.push('--')
  return args
}

/**
 * The git data of repositories that a writable directory holds, to stay read-only: a
 * repository's git directory (hooks, config, refs, objects) is where a command could
 * plant a hook, a `core.fsmonitor` or a filter that git run outside the sandbox later
 * runs, with the user's full power (dsh's own git, when it makes the next worktree or
 * reads a child's changes, or the user's). Found without running git: the repository each
 * writable directory is in (its `.git` found upwards) and those directly in it, each as
 * its `.git` (a directory, or a worktree's `.git` file with the git directory it names and
 * that one's common directory). Only what lies inside a writable directory is listed:
 * everything else is read-only already. Real paths, each once.
 */
export function gitDataWithin(writable: readonly string[]): string[] {
  const roots = writable.map((dir) => realOrUndefined(dir)).filter((dir): dir is string => dir !== undefined)
  const within = (path: string) => roots.some((root) => path === root || path.startsWith(root === sep ? root : `${root}${sep}`))
  const found = new Set<string>()
  const protect = (path: string | undefined) => {
    const real = path === undefined ? undefined : realOrUndefined(path)
    if (real !== undefined && within(real)) found.add(real)
  }
  const visit = (dotGit: string) => {
    let stat
    try {
      stat = lstatSync(dotGit)
    } catch {
      return
    }
    protect(dotGit)
    if (!stat.isFile() && !stat.isSymbolicLink()) return
    // A worktree's (or a separate git directory's) `.git` file: `gitdir: <its git directory>`, which names the common one in `commondir`.
    const named = /^gitdir: (.+)$/m.exec(readOrEmpty(dotGit))?.[1]?.trim()
    if (named === undefined) return
    const gitDir = resolve(dirname(dotGit), named)
    protect(gitDir)
    const common = readOrEmpty(join(gitDir, 'commondir')).trim()
    if (common !== '') protect(resolve(gitDir, common))
  }
  for (const root of roots) {
    for (let at = root; ; at = dirname(at)) {
      visit(join(at, '.git'))
      if (dirname(at) === at) break
    }
    let entries: string[] = []
    try {
      entries = readdirSync(root)
    } catch {
      // unreadable: bubblewrap says so when it binds it
    }
    for (const entry of entries) if (entry !== '.git') visit(join(root, entry, '.git'))
  }
  // Outermost first: bubblewrap mounts in order, and one inside another must come after it.
  return [...found].sort((a, b) => depth(a) - depth(b) || a.localeCompare(b))
}

function depth(path: string): number {
  return relative(sep, path).split(sep).length
}

function realOrUndefined(path: string): string | undefined {
  try {
    return realpathSync(path)
  } catch {
    return undefined
  }
}

function readOrEmpty(file: string): string {
  try {
    return readFileSync(file, 'utf8').slice(0, 4096)
  } catch {
    return ''
  }
}

/** Why `sandbox` is not a well-formed request, or `undefined`. */
export function sandboxRequestProblem(sandbox: unknown): string | undefined {
  if (typeof sandbox !== 'object' || sandbox === null) return 'sandbox must be an object { writable, network }'
  const { writable, network, readable } = sandbox as Partial<BashSandbox>
  if (typeof network !== 'boolean') return `sandbox.network must be true or false (got ${JSON.stringify(network)})`
  return directoriesProblem('writable', writable) ?? (readable === undefined ? undefined : directoriesProblem('readable', readable)) ?? sandboxPlacesProblem(sandbox as BashSandbox)
}

/**
 * What the sandbox makes of its own (`/tmp`, `/proc`, `/dev`) or keeps read-only like the
 * rest (`/sys`, `/run`). A directory bound later, writable or readable, that is one of these
 * or holds one (`/` above all) would put the host's back over it: the whole file system
 * writable, the host's devices, its `/proc` with every process's environment, its `/tmp`
 * with other programs' sockets.
 */
const SANDBOX_MOUNTS = ['/proc', '/dev', '/tmp', '/sys', '/run'] as const
/** Places never bound into the sandbox, even below them: the kernel's views and the host's devices. */
const KERNEL_PLACES = ['/proc', '/sys', '/dev'] as const

/**
 * Why a directory of `sandbox` cannot be bound into one (see `SANDBOX_MOUNTS`), in one line
 * naming it, or `undefined`. Judged by its real path (a symbolic link to `/` is `/`).
 */
export function sandboxPlacesProblem(sandbox: BashSandbox): string | undefined {
  const places: Array<['writable' | 'readable', string]> = [...sandbox.writable.map((dir) => ['writable', dir] as ['writable', string]), ...(sandbox.readable ?? []).map((dir) => ['readable', dir] as ['readable', string])]
  for (const [kind, dir] of places) {
    const real = realOrUndefined(dir) ?? resolve(dir)
    const named = real === dir ? dir : `${dir} (really ${real})`
    const covered = SANDBOX_MOUNTS.filter((mount) => mount === real || mount.startsWith(real === sep ? real : `${real}${sep}`))
    if (covered.length > 0) {
      return `a sandboxed command cannot run with ${named} ${kind}${kind === 'writable' ? ' (its working directory, usually)' : ''}: it is or holds ${covered.join(', ')}, which the sandbox replaces with its own or keeps read-only; run dsh from a project directory instead`
    }
    const kernel = KERNEL_PLACES.find((place) => real.startsWith(`${place}${sep}`))
    if (kernel !== undefined) return `a sandboxed command cannot run with ${named} ${kind}: it is inside ${kernel}, which the sandbox never takes from the host; run dsh from a project directory instead`
  }
  return undefined
}

function directoriesProblem(field: string, dirs: unknown): string | undefined {
  if (!Array.isArray(dirs)) return `sandbox.${field} must be a list of absolute directories`
  for (const dir of dirs as unknown[]) {
    if (typeof dir !== 'string' || !isAbsolute(dir) || dir.includes('\0')) return `sandbox.${field} holds ${JSON.stringify(dir)}: each entry must be an absolute directory`
  }
  return undefined
}

/** Temporary-directory variables: inside the sandbox they must name a directory it can write. */
const TEMP_VARIABLES = ['TMPDIR', 'TMP', 'TEMP'] as const

/**
 * The command's environment in a sandbox: the same allow-listed variables as outside,
 * except that a temporary-directory variable naming a place the sandbox cannot write (or,
 * under `/tmp`, cannot see: its `/tmp` is private) names the private `/tmp` instead, so
 * `mktemp` and compilers still work.
 */
export function sandboxEnvironment(env: Record<string, string>, sandbox: BashSandbox): Record<string, string> {
  const within = (path: string) => sandbox.writable.some((dir) => path === dir || path.startsWith(dir.endsWith('/') ? dir : `${dir}/`))
  const confined = { ...env }
  for (const name of TEMP_VARIABLES) {
    const value = confined[name]
    if (value !== undefined && value !== '/tmp' && !within(value)) confined[name] = '/tmp'
  }
  return confined
}

const problems = new Map<string, string | undefined>()

/**
 * Why commands cannot be sandboxed on this machine, in one line naming what to do, or
 * `undefined` when they can. The answer comes from running a real sandbox once (the
 * strictest: no network) and is remembered for the life of the process, so it costs one
 * short child process the first time and nothing after. Call it at start-up, before
 * anything that needs a sandbox starts.
 */
export function sandboxProblem(program: string = SANDBOX_PROGRAM): string | undefined {
  if (problems.has(program)) return problems.get(program)
  const problem = probe(program)
  problems.set(program, problem)
  return problem
}

function probe(program: string): string | undefined {
  const args = sandboxArguments({ writable: [], network: false }, '/')
  // Loaded here, not with the module (as in local.ts): most starts never probe.
  const run = process.getBuiltinModule('node:child_process').spawnSync(program, [...args, 'true'], { stdio: ['ignore', 'ignore', 'pipe'], encoding: 'utf8', timeout: PROBE_TIMEOUT_MS, cwd: '/' })
  if (run.error) {
    if ((run.error as NodeJS.ErrnoException).code === 'ENOENT') {
      return `sandboxed commands need bubblewrap, which is not installed: install the Debian package ${SANDBOX_PACKAGE} (program ${program}), or turn the sandbox off`
    }
    return `sandboxed commands need bubblewrap, which could not be run here (${program}: ${run.error.message})`
  }
  if (run.status === 0) return undefined
  const said = run.stderr.trim().split('\n').pop() || (run.signal ? `killed by ${run.signal}` : `exit code ${run.status}`)
  return `bubblewrap cannot make a sandbox on this machine (${said}): it needs user namespaces (sysctl user.max_user_namespaces > 0, kernel.unprivileged_userns_clone=1 where that exists) or root, and a container that allows creating namespaces`
}
