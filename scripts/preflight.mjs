#!/usr/bin/env node
/**
 * The test command's one preflight for the system programs tests need. Each is looked up
 * on PATH; a missing one is installed from Debian's packages when this machine can
 * (apt-get present, running as root), else one line names the package to install. Tests
 * that need a program never skip without it: they fail, naming it, so this is where a
 * fresh machine gets what `npm test` needs.
 */
import { spawnSync } from 'node:child_process'
import { accessSync, constants } from 'node:fs'
import { delimiter, join } from 'node:path'

/** program → the Debian package that provides it, and which tests need it. */
const NEEDED = [
  { program: 'redis-server', pkg: 'redis-server', for: 'the queue provider and dsh worker tests' },
  { program: 'chromium', pkg: 'chromium', for: "dsh ui's browser test" },
  { program: 'bwrap', pkg: 'bubblewrap', for: "the bash sandbox's tests (@dsh/bash, @dsh/tool-bash)" },
]

function onPath(program) {
  for (const dir of (process.env.PATH ?? '').split(delimiter)) {
    try {
      accessSync(join(dir, program), constants.X_OK)
      return true
    } catch {
      // not in this directory
    }
  }
  return false
}

const missing = NEEDED.filter(({ program }) => !onPath(program))
if (missing.length > 0) {
  const packages = missing.map(({ pkg }) => pkg)
  const canInstall = onPath('apt-get') && typeof process.getuid === 'function' && process.getuid() === 0
  if (canInstall) {
    process.stderr.write(`preflight: installing ${packages.join(', ')} from Debian's packages\n`)
    const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' }
    let install = spawnSync('apt-get', ['install', '-y', '-q', '--no-install-recommends', ...packages], { stdio: ['ignore', 'ignore', 'inherit'], env })
    if (install.status !== 0) {
      // The package lists may be missing or stale on a fresh machine.
      spawnSync('apt-get', ['update', '-q'], { stdio: ['ignore', 'ignore', 'inherit'], env })
      install = spawnSync('apt-get', ['install', '-y', '-q', '--no-install-recommends', ...packages], { stdio: ['ignore', 'ignore', 'inherit'], env })
    }
  }
  for (const { program, pkg, for: purpose } of missing) {
    if (!onPath(program)) process.stderr.write(`preflight: ${program} is missing and could not be installed here: install the Debian package ${pkg} (needed by ${purpose}); those tests fail without it\n`)
  }
}
