/**
 * The built dsh with its bash tool configured `sandbox: no-network`: a model-run command
 * writes in the working directory, fails to write elsewhere, and cannot read dsh's own
 * environment (its keys) through /proc, which the same command unconfined does. Where
 * bubblewrap cannot be found, the run refuses to start. Needs `bwrap` (npm test's
 * preflight installs it); fails, never skips, without it.
 */
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { sandboxProblem } from '@dsh/bash'
import { runDsh, tempDir } from './cli.js'

const outsideDirs: string[] = []
afterAll(() => {
  for (const dir of outsideDirs) rmSync(dir, { recursive: true, force: true })
})

beforeAll(() => {
  expect(sandboxProblem(), 'these tests run commands under bubblewrap: npm test\'s preflight (scripts/preflight.mjs) installs it').toBeUndefined()
})

/** A dsh.yml that confines the bash tool, or leaves it as it is. */
function config(dir: string, sandbox: boolean | 'no-network'): string {
  const path = join(dir, `dsh-${String(sandbox)}.yml`)
  writeFileSync(path, ['- id: tool-bash', '  name: "@dsh/tool-bash"', `  config: { sandbox: ${JSON.stringify(sandbox)} }`].join('\n'))
  return path
}

describe('dsh run with a sandboxed bash tool', () => {
  it('a command writes only in the working directory and cannot read dsh\'s environment through /proc', async () => {
    const home = tempDir('dsh-sandbox-home-')
    const workspace = tempDir('dsh-sandbox-work-')
    // Outside /tmp, so the path is visible inside the sandbox (read-only) rather than hidden by its private /tmp.
    const outside = mkdtempSync('/var/tmp/dsh-sandbox-outside-')
    outsideDirs.push(outside)
    const secret = `sk-dsh-sandbox-${process.pid}-${Date.now()}`
    const script = join(home, 'script.yml')
    const command = [
      'echo inside > inside.txt && echo wrote-inside',
      `touch ${outside}/escaped`,
      // Every environment /proc shows: dsh's among them, unconfined.
      "for file in /proc/[0-9]*/environ; do tr '\\0' '\\n' < \"$file\"; done 2>/dev/null | grep -c DSH_TEST_PARENT_SECRET= | sed 's/^/secrets-seen=/'",
      "for file in /proc/[0-9]*/environ; do tr '\\0' '\\n' < \"$file\"; done 2>/dev/null | grep DSH_TEST_PARENT_SECRET=",
      'true',
    ].join('; ')
    writeFileSync(script, ['- reply:', `    - call: { tool: bash, args: { command: ${JSON.stringify(command)} } }`, '    - text: "result: {{last_tool_result}}"'].join('\n'))
    const run = (sandbox: boolean | 'no-network') =>
      runDsh(['run', '--permission', 'allow', '--config', config(home, sandbox), '--model', `scripted:${script}`, '--session-dir', home, 'go'], {
        cwd: workspace,
        env: { DSH_TEST_PARENT_SECRET: secret },
        timeoutMs: 60_000,
      })

    const confined = await run('no-network')
    expect(confined.code).toBe(0)
    expect(confined.stdout).toContain('wrote-inside')
    expect(confined.stdout).toMatch(/touch: cannot touch '.*escaped': Read-only file system/)
    expect(confined.stdout).toContain('secrets-seen=0')
    expect(confined.stdout).not.toContain(secret)
    expect(readFileSync(join(workspace, 'inside.txt'), 'utf8')).toBe('inside\n')
    expect(existsSync(join(outside, 'escaped'))).toBe(false)

    // The same run unconfined: the command reads dsh's secret, and writes where it likes.
    const open = await run(false)
    expect(open.code).toBe(0)
    expect(open.stdout).toContain(`DSH_TEST_PARENT_SECRET=${secret}`)
    expect(existsSync(join(outside, 'escaped'))).toBe(true)
  })

  it('without bubblewrap the run refuses to start, in one line naming the package', async () => {
    const home = tempDir('dsh-sandbox-home-')
    const script = join(home, 'script.yml')
    writeFileSync(script, ['- reply:', `    - call: { tool: bash, args: { command: "touch ${home}/ran" } }`, '    - text: "ran"'].join('\n'))
    // A PATH with bash and nothing else: no bwrap to find.
    const bin = join(home, 'bin')
    mkdirSync(bin)
    symlinkSync('/bin/bash', join(bin, 'bash'))
    const result = await runDsh(['run', '--permission', 'allow', '--config', config(home, true), '--model', `scripted:${script}`, '--session-dir', home, 'go'], {
      cwd: home,
      env: { PATH: bin },
      timeoutMs: 60_000,
    })
    expect(result.code).toBe(2)
    expect(result.stderr).toBe(`dsh: config ${config(home, true)}: plugin "tool-bash" (@dsh/tool-bash) failed to start: @dsh/tool-bash: sandbox: true: sandboxed commands need bubblewrap, which is not installed: install the Debian package bubblewrap (program bwrap), or turn the sandbox off\n`)
    expect(result.stdout).toBe('')
    expect(existsSync(join(home, 'ran'))).toBe(false)
  })
})
