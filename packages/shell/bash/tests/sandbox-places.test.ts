/**
 * What a sandbox binds, under the real bubblewrap: the git data of a repository in a
 * writable directory stays read-only (a confined command cannot plant a hook or config that
 * git outside later runs), and a directory that would undo the sandbox's own `/tmp`,
 * `/proc` or `/dev` (`/`, `/tmp` itself) is refused before anything runs. These tests need
 * `bwrap` (npm test's preflight installs it) and fail, never skip, without it.
 */
import { execFileSync } from 'node:child_process'
import { existsSync, mkdirSync, readFileSync, symlinkSync } from 'node:fs'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, beforeAll, describe, expect, it } from 'vitest'
import { Context, type Fiber } from 'cordis'
import { BashService, LocalBashExecutor, sandboxProblem, type BashError } from '@dsh/bash'

let fiber: Fiber | undefined
const made: string[] = []

afterEach(async () => {
  await fiber?.dispose()
  fiber = undefined
  await Promise.all(made.splice(0).map((path) => rm(path, { recursive: true, force: true })))
})

beforeAll(() => {
  expect(sandboxProblem(), 'these tests run commands under bubblewrap: npm test\'s preflight (scripts/preflight.mjs) installs it').toBeUndefined()
})

async function setup() {
  const ctx = new Context()
  fiber = await ctx.plugin(BashService, {} as BashService.Config)
  return ctx.bash
}

async function tempDir(parent = tmpdir()): Promise<string> {
  const dir = await mkdtemp(join(parent, 'dsh-sandbox-places-'))
  made.push(dir)
  return dir
}

const git = (cwd: string, ...args: string[]) =>
  execFileSync('git', ['-c', 'user.email=test@dsh', '-c', 'user.name=test', '-c', 'core.hooksPath=/dev/null', ...args], { cwd, encoding: 'utf8', env: { PATH: process.env.PATH, HOME: tmpdir(), GIT_CONFIG_NOSYSTEM: '1', GIT_CONFIG_GLOBAL: '/dev/null' } })

function repository(dir: string): string {
  mkdirSync(dir, { recursive: true })
  git(dir, 'init', '-q', '-b', 'main')
  git(dir, 'commit', '-q', '--allow-empty', '-m', 'first')
  return dir
}

/** Every way a command could change a repository's git data, each reporting whether it worked. */
const PLANT = [
  `printf '#!/bin/sh\\ntouch /tmp/ran\\n' > .git/hooks/post-checkout && echo planted-hook`,
  'git config core.fsmonitor /bin/evil && echo planted-config',
  'echo 0000000000000000000000000000000000000000 > .git/refs/heads/main && echo moved-branch',
  'mv .git .git-moved && echo moved-git',
  'rm -rf .git && echo removed-git',
].join('; ')

describe('the git data of repositories in a writable directory', () => {
  it("a repository that is the writable directory: its files stay writable, its .git read-only (no hook, config or ref planted, not moved)", async () => {
    const bash = await setup()
    const repo = repository(join(await tempDir(), 'repo'))
    const head = git(repo, 'rev-parse', 'HEAD')
    const result = await bash.run({ command: `echo work > file.txt && echo wrote-file; ${PLANT}; git status --short`, cwd: repo, sandbox: { writable: [repo], network: false } })
    expect(result.output).toContain('wrote-file')
    expect(result.output).not.toMatch(/planted-hook|planted-config|moved-branch|moved-git|removed-git/)
    expect(result.output).toContain('?? file.txt')
    expect(readFileSync(join(repo, 'file.txt'), 'utf8')).toBe('work\n')
    expect(existsSync(join(repo, '.git', 'hooks', 'post-checkout'))).toBe(false)
    expect(git(repo, 'config', '--list')).not.toContain('fsmonitor')
    expect(git(repo, 'rev-parse', 'HEAD')).toBe(head)
  })

  it('repositories directly in the writable directory, and a worktree whose repository is there too, keep their git data read-only', async () => {
    const bash = await setup()
    const work = await tempDir()
    const repo = repository(join(work, 'repo'))
    const worktree = join(work, 'tree')
    git(repo, 'worktree', 'add', '-q', '-b', 'side', worktree)
    const inRepo = await bash.run({ command: `cd repo && { ${PLANT}; }`, cwd: work, sandbox: { writable: [work], network: false } })
    expect(inRepo.output).not.toMatch(/planted-hook|planted-config|moved-branch|moved-git|removed-git/)
    // From the worktree: its .git file cannot be repointed, and its administrative directory (in the repository's) cannot be written.
    const inWorktree = await bash.run({ command: 'echo "gitdir: /elsewhere" > .git && echo repointed; git config core.fsmonitor /bin/evil && echo planted-config; echo x > file && echo wrote-file', cwd: worktree, sandbox: { writable: [worktree, repo + '/..'], network: false } })
    expect(inWorktree.output).toContain('wrote-file')
    expect(inWorktree.output).not.toMatch(/repointed|planted-config/)
    expect(readFileSync(join(worktree, '.git'), 'utf8')).toMatch(/^gitdir: .*\.git\/worktrees\/tree\n$/)
    expect(existsSync(join(repo, '.git', 'hooks', 'post-checkout'))).toBe(false)
    expect(git(repo, 'config', '--list')).not.toContain('fsmonitor')
  })
})

describe('a directory that would undo the sandbox', () => {
  const refusal = (run: () => unknown) => {
    try {
      run()
    } catch (error) {
      return error as BashError
    }
    throw new Error('expected a refusal')
  }

  it('/ writable (dsh started in /) is refused in one line naming it and why, and nothing runs', async () => {
    const bash = await setup()
    const outside = await tempDir('/var/tmp')
    const error = refusal(() => bash.start({ command: `touch ${outside}/escaped`, cwd: '/', sandbox: { writable: ['/'], network: false } }))
    expect(error).toMatchObject({ code: 'INVALID_REQUEST' })
    expect(error.message).toBe('a sandboxed command cannot run with / writable (its working directory, usually): it is or holds /proc, /dev, /tmp, /sys, /run, which the sandbox replaces with its own or keeps read-only; run dsh from a project directory instead')
    expect(existsSync(join(outside, 'escaped'))).toBe(false)
  })

  it("/tmp writable (the host's /tmp over the private one) and / readable are refused; a symbolic link to / is judged as /; a directory under /tmp is fine", async () => {
    const bash = await setup()
    expect(refusal(() => bash.start({ command: 'true', cwd: '/tmp', sandbox: { writable: ['/tmp'], network: false } })).message).toMatch(/^a sandboxed command cannot run with \/tmp writable .*: it is or holds \/tmp, which the sandbox replaces/)
    const dir = await tempDir()
    expect(refusal(() => bash.start({ command: 'true', cwd: dir, sandbox: { writable: [dir], readable: ['/'], network: false } })).message).toMatch(/^a sandboxed command cannot run with \/ readable: it is or holds \/proc, \/dev, \/tmp/)
    const link = join(await tempDir('/var/tmp'), 'root')
    symlinkSync('/', link)
    expect(refusal(() => bash.start({ command: 'true', cwd: link, sandbox: { writable: [link], network: false } })).message).toContain(`cannot run with ${link} (really /) writable`)
    expect(refusal(() => bash.start({ command: 'true', cwd: dir, sandbox: { writable: [dir, '/proc/self'], network: false } })).message).toMatch(/cannot run with \/proc\/self \(really \/proc\/\d+\) writable: it is inside \/proc/)
    expect(await bash.run({ command: 'echo fine > f && cat f', cwd: dir, sandbox: { writable: [dir], network: false } })).toMatchObject({ exitCode: 0, output: 'fine\n' })
  })

  it('the executor refuses it too, for a caller that does not go through ctx.bash', () => {
    const executor = new LocalBashExecutor({ killGraceMs: 1000, maxOutputChars: 10_000 })
    expect(refusal(() => executor.start({ command: 'true', cwd: '/', sandbox: { writable: ['/'], network: true } }))).toMatchObject({ code: 'INVALID_REQUEST', message: expect.stringContaining('cannot run with / writable') })
  })
})
