/**
 * A directory the agent's user may not read. Tests run as root, which reads everything, so
 * the tools run here in a Node process that drops to the unprivileged user `nobody`
 * (setgroups, setgid, setuid) after it has loaded the package as built (dist/, like the
 * CLI's tests): the checkout may sit where `nobody` cannot read (a home of mode 0700), so
 * nothing is loaded from it after the drop. ls and read refuse in one line, glob and grep go
 * on past it and say how much they could not read. A process that could not drop (not root,
 * or the drop did not take) fails the test; it never runs the tools as root.
 */
import { execFileSync } from 'node:child_process'
import { chmod, mkdir } from 'node:fs/promises'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { afterEach, beforeAll, describe, expect, it } from 'vitest'
import { cleanUp, files, tempDir } from './files-harness.js'

afterEach(cleanUp)

const dist = fileURLToPath(new URL('../dist/index.js', import.meta.url))

beforeAll(() => {
  expect(process.getuid?.(), 'this test drops to the user nobody (setuid), which needs root').toBe(0)
})

const NOBODY = 65534

/**
 * Each call's result, from the tools registered by the built plugin, run as `nobody` in `cwd`.
 * The module is imported while the process is still root; the drop applies to every thread
 * (glibc changes the ids of all of them), so the thread pool's file system calls and the
 * built-in search's worker run as `nobody` too, and so does ripgrep, a child of this process.
 */
function asNobody(cwd: string, config: Record<string, unknown>, calls: { tool: string; args: Record<string, unknown> }[]): { text: string; isError: boolean }[] {
  const script = `
    const { FilesToolPlugin } = await import(${JSON.stringify(dist)})
    process.setgroups([])
    process.setgid(${NOBODY})
    process.setuid(${NOBODY})
    const ids = [process.getuid(), process.geteuid(), process.getgid(), process.getegid(), ...process.getgroups()]
    if (ids.some((id) => id !== ${NOBODY})) throw new Error('could not drop to nobody: ids are ' + ids.join(','))
    const defs = new Map()
    // The plugin is also the ctx.files service: a context that takes its registration and nothing else.
    new FilesToolPlugin({ tools: { register: (def) => defs.set(def.name, def) }, reflect: { provide() {} } }, ${JSON.stringify({
      allowedDirectories: [],
      maxFileBytes: 1_000_000,
      readDefaultLines: 2000,
      maxLineChars: 2000,
      maxOutputChars: 50_000,
      maxResults: 500,
      maxWalkEntries: 200_000,
      grepTimeoutMs: 30_000,
      ripgrep: true,
      ...config,
    })})
    const exec = { agent: { session: { header: { cwd: ${JSON.stringify(cwd)} } } }, signal: new AbortController().signal, callId: 'c' }
    const out = []
    for (const call of ${JSON.stringify(calls)}) {
      const result = await defs.get(call.tool).execute(call.args, exec)
      out.push(typeof result === 'string' ? { text: result, isError: false } : { text: result.content, isError: result.isError === true })
    }
    process.stdout.write(JSON.stringify(out))
  `
  const stdout = execFileSync(process.execPath, ['--input-type=module', '-e', script], { cwd, encoding: 'utf8', env: { PATH: process.env.PATH ?? '/usr/bin:/bin' } })
  return JSON.parse(stdout) as { text: string; isError: boolean }[]
}

describe('a directory the user may not read', () => {
  it('is refused by ls and read in one line; glob and grep go past it and count it', async () => {
    const dir = await tempDir()
    await files(dir, { 'open/a.txt': 'hit\n', 'locked/secret.txt': 'hit\n' })
    await mkdir(join(dir, 'locked', 'inner'))
    await chmod(dir, 0o755)
    await chmod(join(dir, 'open'), 0o755)
    await chmod(join(dir, 'open', 'a.txt'), 0o644)
    await chmod(join(dir, 'locked'), 0o000)
    const calls = [
      { tool: 'ls', args: { path: 'locked' } },
      { tool: 'read', args: { path: 'locked/secret.txt' } },
      { tool: 'glob', args: { pattern: '**/*.txt' } },
      { tool: 'grep', args: { pattern: 'hit' } },
    ]
    const fallback = asNobody(dir, { ripgrep: false }, calls)
    expect(fallback).toEqual([
      { text: 'ls: locked cannot be listed: permission denied', isError: true },
      { text: 'read: locked/secret.txt: permission denied', isError: true },
      { text: 'open/a.txt\n(1 directory could not be read)', isError: false },
      { text: 'open/a.txt\n(1 files or directories could not be read)', isError: false },
    ])
    // ripgrep skips what it cannot read, as the built-in search does (it does not count it).
    const ripgrep = asNobody(dir, { ripgrep: true }, calls.slice(3))
    expect(ripgrep).toEqual([{ text: 'open/a.txt', isError: false }])
  })
})
