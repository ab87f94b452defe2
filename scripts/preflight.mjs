#!/usr/bin/env node
/**
 * The test command's one preflight for the system programs tests need. Each is looked up
 * on PATH; a missing one is installed from Debian's packages when this machine can
 * (apt-get present, running as root), one package at a time and each within a time limit,
 * with one `apt-get update` first if an install fails (a fresh machine has no package lists).
 * Any program still missing then gets one line naming it and its Debian package, and the
 * preflight exits 1, so `npm test` stops before vitest runs: tests that need a program never
 * skip without it, so this is where a fresh machine gets, or is told, what `npm test` needs.
 * The README's set-up section lists the same programs; keep the two together.
 */
import { spawnSync } from 'node:child_process'
import { accessSync, constants } from 'node:fs'
import { delimiter, join } from 'node:path'

/** program → the Debian package that provides it, and which tests need it. */
const NEEDED = [
  { program: 'redis-server', pkg: 'redis-server', for: 'the queue provider and dsh worker tests' },
  { program: 'chromium', pkg: 'chromium', for: "dsh ui's browser tests" },
  { program: 'bwrap', pkg: 'bubblewrap', for: "the bash sandbox's tests in @dsh/bash, @dsh/tool-bash and the CLI" },
  { program: 'tmux', pkg: 'tmux', for: "the CLI's terminal tests: permission prompts, dsh run on a TTY" },
  { program: 'git', pkg: 'git', for: 'the workspaces tests and the CLI tests that make worktrees' },
  { program: 'pgrep', pkg: 'procps', for: "the CLI's background-child tests" },
  { program: 'ip', pkg: 'iproute2', for: "the queue's multi-host test, in network namespaces" },
  { program: 'rg', pkg: 'ripgrep', for: "@dsh/tool-files' grep tests, which compare ripgrep with the built-in search" },
  { program: 'setsid', pkg: 'util-linux', for: 'the process-tree and provider tests that start a process in a session of its own' },
]

/** How long apt-get may take for one package (chromium is the large one), and for the package lists. */
const INSTALL_LIMIT_MS = 600_000
const UPDATE_LIMIT_MS = 300_000

function onPath(program) {
  // root's PATH has the sbin directories; another user's may not, and `ip` lives there.
  const dirs = [...(process.env.PATH ?? '').split(delimiter), '/usr/sbin', '/sbin']
  for (const dir of dirs) {
    try {
      accessSync(join(dir, program), constants.X_OK)
      return true
    } catch {
      // not in this directory
    }
  }
  return false
}

/** Runs apt-get with a time limit; a short reason when it did not succeed. */
function aptGet(args, limitMs) {
  const result = spawnSync('apt-get', args, {
    stdio: ['ignore', 'ignore', 'inherit'],
    env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' },
    timeout: limitMs,
  })
  if (result.error?.code === 'ETIMEDOUT') return `apt-get ${args[0]} took longer than ${limitMs / 1000} s`
  if (result.error) return `apt-get ${args[0]}: ${result.error.message}`
  if (result.status !== 0) return `apt-get ${args[0]} exited ${result.status ?? result.signal}`
  return undefined
}

const missing = NEEDED.filter(({ program }) => !onPath(program))
if (missing.length > 0) {
  const whyNot = new Map()
  const canInstall = onPath('apt-get') && typeof process.getuid === 'function' && process.getuid() === 0
  if (canInstall) {
    let updated = false
    for (const pkg of new Set(missing.map(({ pkg }) => pkg))) {
      process.stderr.write(`preflight: installing the Debian package ${pkg}\n`)
      const install = () => aptGet(['install', '-y', '-q', '--no-install-recommends', pkg], INSTALL_LIMIT_MS)
      let failure = install()
      if (failure !== undefined && !updated) {
        // The package lists may be missing or stale on a fresh machine: fetch them once.
        updated = true
        const updateFailure = aptGet(['update', '-q'], UPDATE_LIMIT_MS)
        failure = updateFailure === undefined ? install() : `${failure}; ${updateFailure}`
      }
      if (failure !== undefined) whyNot.set(pkg, failure)
    }
  } else {
    for (const { pkg } of missing) whyNot.set(pkg, 'installing needs apt-get and root')
  }
  const stillMissing = missing.filter(({ program }) => !onPath(program))
  for (const { program, pkg, for: purpose } of stillMissing) {
    process.stderr.write(`preflight: ${program} is missing: install the Debian package ${pkg} (not installed here: ${whyNot.get(pkg) ?? 'the package did not provide it'}); needed by ${purpose}\n`)
  }
  if (stillMissing.length > 0) process.exit(1)
}
