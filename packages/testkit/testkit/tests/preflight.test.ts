/**
 * The test command's preflight (scripts/preflight.mjs) on a machine that lacks the programs:
 * run with a PATH holding only node and an apt-get that fails, it must exit non-zero with one
 * line per missing program naming it and its Debian package, having tried each package on its
 * own and fetched the package lists once. No real package is installed.
 */
import { spawnSync } from 'node:child_process'
import { chmodSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { afterAll, describe, expect, it } from 'vitest'

const preflight = fileURLToPath(new URL('../../../../scripts/preflight.mjs', import.meta.url))
const bin = mkdtempSync(join(tmpdir(), 'dsh-preflight-'))
afterAll(() => rmSync(bin, { recursive: true, force: true }))

/** The programs the preflight must name with their packages; `ip` is left out: it is found in /usr/sbin whatever PATH says. */
const EXPECTED = [
  ['redis-server', 'redis-server'],
  ['chromium', 'chromium'],
  ['bwrap', 'bubblewrap'],
  ['tmux', 'tmux'],
  ['git', 'git'],
  ['pgrep', 'procps'],
  ['rg', 'ripgrep'],
  ['setsid', 'util-linux'],
] as const

describe('scripts/preflight.mjs where the programs tests need are missing and cannot be installed', () => {
  symlinkSync(process.execPath, join(bin, 'node'))
  const calls = join(bin, 'apt-get-calls')
  writeFileSync(join(bin, 'apt-get'), `#!/bin/sh\necho "$*" >> ${calls}\nexit 100\n`)
  chmodSync(join(bin, 'apt-get'), 0o755)
  const result = spawnSync(process.execPath, [preflight], { env: { PATH: bin }, encoding: 'utf8', timeout: 60_000 })
  const lines = result.stderr.split('\n').filter((line) => line.includes(' is missing'))

  it('exits 1 with one line per missing program naming it and its Debian package', () => {
    expect(result.status, result.stderr).toBe(1)
    for (const [program, pkg] of EXPECTED) {
      expect(lines.filter((line) => line.startsWith(`preflight: ${program} is missing: install the Debian package ${pkg} `)), `${program}\n${result.stderr}`).toHaveLength(1)
    }
  })

  it('tries each package with its own apt-get install and fetches the lists once (as root; otherwise says installing needs root)', () => {
    if (process.getuid?.() !== 0) {
      for (const line of lines) expect(line).toContain('not installed here: installing needs apt-get and root')
      return
    }
    const made = readFileSync(calls, 'utf8').trim().split('\n')
    expect(made.filter((call) => call.startsWith('update'))).toHaveLength(1)
    for (const [, pkg] of EXPECTED) expect(made, pkg).toContain(`install -y -q --no-install-recommends ${pkg}`)
    for (const line of lines) expect(line).toContain('not installed here: apt-get install exited 100')
  })
})
