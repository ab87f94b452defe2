/**
 * dsh's own git in a repository someone else wrote to: hooks, a file-system monitor,
 * filters and drivers the repository's config names, and a nested repository a child
 * committed, each a program that would run unconfined with dsh's power. Real git, real
 * files; each planted program leaves a mark when it runs, and none may.
 */
import { execFileSync } from 'node:child_process'
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { delimiter, join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { Context } from 'cordis'
import { WorkspaceService } from '@dsh/workspaces'

const made: string[] = []
const savedEnv = { ...process.env }
afterEach(() => {
  for (const name of Object.keys(process.env)) if (!(name in savedEnv)) delete process.env[name]
  Object.assign(process.env, savedEnv)
  for (const dir of made.splice(0)) rmSync(dir, { recursive: true, force: true })
})

/** The test's own git: nothing configured outside the repository, so what the test plants is all there is. */
const TEST_GIT_ENV = { PATH: process.env.PATH, HOME: tmpdir(), GIT_CONFIG_NOSYSTEM: '1', GIT_CONFIG_GLOBAL: '/dev/null', GIT_AUTHOR_NAME: 'test', GIT_AUTHOR_EMAIL: 'test@localhost', GIT_COMMITTER_NAME: 'test', GIT_COMMITTER_EMAIL: 'test@localhost' }
/** The test's own git, with every program a repository could name turned off (after it has been planted). */
const sh = (cwd: string, ...args: string[]) =>
  execFileSync('git', ['-c', 'core.hooksPath=/dev/null', '-c', 'core.fsmonitor=false', ...args], { cwd, env: TEST_GIT_ENV, encoding: 'utf8' })

function temp(prefix = 'dsh-hostile-'): string {
  const dir = mkdtempSync(join(tmpdir(), prefix))
  made.push(dir)
  return dir
}

function repository(): string {
  const dir = join(temp(), 'repo')
  mkdirSync(dir)
  sh(dir, 'init', '--quiet', '-b', 'main')
  writeFileSync(join(dir, 'notes.txt'), 'one\ntwo\n')
  sh(dir, 'add', '.')
  sh(dir, 'commit', '--quiet', '-m', 'start')
  return dir
}

async function service() {
  const ctx = new Context()
  await ctx.plugin(WorkspaceService, { dir: temp('dsh-hostile-home-') })
  return ctx.workspaces
}

const byRoot = { parentAgent: 'root', ancestorAgents: [] as string[] }

/** Where planted programs leave their marks, and a program that leaves the mark `name` (and passes its input through, as a filter would). */
function marks() {
  const dir = temp('dsh-hostile-marks-')
  const program = (name: string) => {
    const file = join(temp('dsh-hostile-bin-'), name)
    writeFileSync(file, `#!/bin/sh\ntouch '${join(dir, name)}'\ncat\n`)
    chmodSync(file, 0o755)
    return file
  }
  return { program, left: () => readdirSync(dir).sort() }
}

describe("dsh's git in a repository a confined child could have written", () => {
  it("hooks and a file-system monitor in the repository's git directory never run, through making, reading, merging and discarding workspaces", async () => {
    const repo = repository()
    const { program, left } = marks()
    for (const hook of ['post-checkout', 'pre-commit', 'prepare-commit-msg', 'commit-msg', 'post-commit', 'pre-merge-commit', 'post-merge', 'reference-transaction', 'post-index-change', 'pre-auto-gc']) {
      writeFileSync(join(repo, '.git', 'hooks', hook), `#!/bin/sh\nexec '${program(hook)}' </dev/null\n`, { mode: 0o755 })
    }
    const hooksDir = temp('dsh-hostile-hooks-')
    writeFileSync(join(hooksDir, 'post-checkout'), `#!/bin/sh\nexec '${program('hooks-path')}' </dev/null\n`, { mode: 0o755 })
    sh(repo, 'config', 'core.hooksPath', hooksDir)
    sh(repo, 'config', 'core.fsmonitor', program('fsmonitor'))
    const workspaces = await service()
    const { ref } = await workspaces.create({ mode: 'worktree', source: repo, childId: 'kept', tree: 'root', ...byRoot })
    writeFileSync(join(ref.path, 'notes.txt'), 'one\ntwo\nthree\n')
    expect((await workspaces.changes('kept')).files).toEqual([{ path: 'notes.txt', status: 'modified', added: 1, removed: 0 }])
    expect(await workspaces.merge('kept')).toMatchObject({ ok: true })
    await workspaces.create({ mode: 'worktree', source: repo, childId: 'thrown', tree: 'root', ...byRoot })
    await workspaces.discard('thrown')
    expect(readFileSync(join(repo, 'notes.txt'), 'utf8')).toBe('one\ntwo\nthree\n')
    expect(left()).toEqual([])
  })

  it("filters, diff and merge drivers, an external diff, a pager and signing that the repository's config names never run, and the merge still brings the child's work back", async () => {
    const repo = repository()
    const { program, left } = marks()
    // Attributes give every file each driver; committed before the drivers exist, as a child's commit would be.
    writeFileSync(join(repo, '.gitattributes'), '* filter=evil diff=evil merge=evil\n*.txt filter=a.b\n')
    sh(repo, 'add', '.gitattributes')
    sh(repo, 'commit', '--quiet', '-m', 'attributes')
    const config = {
      'filter.evil.clean': program('clean'),
      'filter.evil.smudge': program('smudge'),
      'filter.evil.process': program('process'),
      'filter.evil.required': 'true',
      'filter.a.b.clean': program('dotted-clean'),
      'diff.evil.textconv': program('textconv'),
      'diff.evil.command': program('diff-command'),
      'diff.external': program('external-diff'),
      'merge.evil.driver': program('merge-driver'),
      'core.pager': program('pager'),
      'commit.gpgSign': 'true',
      'gpg.program': program('gpg'),
      'credential.helper': program('credential'),
    }
    for (const [key, value] of Object.entries(config)) sh(repo, 'config', key, value)
    const workspaces = await service()
    const { ref } = await workspaces.create({ mode: 'worktree', source: repo, childId: 'c', tree: 'root', ...byRoot })
    writeFileSync(join(ref.path, 'notes.txt'), 'one\ntwo\nthree\n')
    writeFileSync(join(ref.path, 'new.txt'), 'new\n')
    expect((await workspaces.changes('c')).files.map((file) => [file.path, file.status])).toEqual([['new.txt', 'added'], ['notes.txt', 'modified']])
    expect(await workspaces.merge('c')).toMatchObject({ ok: true })
    expect(readFileSync(join(repo, 'notes.txt'), 'utf8')).toBe('one\ntwo\nthree\n')
    expect(left()).toEqual([])
  })

  it('a nested repository a child commits in its worktree (or leaves there) is never entered, so the clean filter its own config names never runs', async () => {
    const repo = repository()
    const { program, left } = marks()
    const workspaces = await service()
    const { ref } = await workspaces.create({ mode: 'worktree', source: repo, childId: 'c', tree: 'root', ...byRoot })
    const nested = (name: string) => {
      const dir = join(ref.path, name)
      mkdirSync(dir)
      sh(dir, 'init', '--quiet')
      writeFileSync(join(dir, '.gitattributes'), '* filter=evil\n')
      writeFileSync(join(dir, 'file.txt'), 'inside\n')
      sh(dir, 'add', '.')
      sh(dir, 'commit', '--quiet', '-m', 'nested')
      sh(dir, 'config', 'filter.evil.clean', program(`${name}-clean`))
      // Newer than its index: git would have to read it (through the filter) to know it is unchanged.
      writeFileSync(join(dir, 'file.txt'), 'inside\n')
    }
    nested('committed')
    sh(ref.path, 'add', 'committed')
    sh(ref.path, 'commit', '--quiet', '-m', 'a nested repository')
    nested('left')
    writeFileSync(join(ref.path, 'committed', 'file.txt'), 'inside\n')
    await workspaces.changes('c')
    expect(await workspaces.merge('c')).toMatchObject({ ok: true })
    expect(left()).toEqual([])
  })

  it('sees only PATH, HOME, LANG and the settings dsh gives it: never the credentials or git variables of its parent', async () => {
    const repo = repository()
    const log = temp('dsh-hostile-env-')
    const wrapper = temp('dsh-hostile-wrapper-')
    const realGit = execFileSync('sh', ['-c', 'command -v git'], { encoding: 'utf8' }).trim()
    writeFileSync(join(wrapper, 'git'), `#!/bin/sh\ncat /proc/$$/environ > '${log}'/$$.env\nexec '${realGit}' "$@"\n`, { mode: 0o755 })
    process.env.PATH = `${wrapper}${delimiter}${process.env.PATH}`
    process.env.DSH_TEST_API_KEY = 'sk-secret-in-the-parent'
    process.env.GIT_DIR = join(temp(), 'elsewhere')
    process.env.GIT_CONFIG_PARAMETERS = "'core.fsmonitor'='/bin/false'"
    process.env.GIT_SSH_COMMAND = 'ssh -i key'
    const workspaces = await service()
    const { ref } = await workspaces.create({ mode: 'worktree', source: repo, childId: 'c', tree: 'root', ...byRoot })
    writeFileSync(join(ref.path, 'notes.txt'), 'changed\n')
    expect(await workspaces.merge('c')).toMatchObject({ ok: true })
    const environments = readdirSync(log).map((file) => readFileSync(join(log, file), 'utf8').split('\0').filter(Boolean))
    expect(environments.length).toBeGreaterThan(5)
    const allowed = /^(PATH|HOME|LANG|XDG_CONFIG_HOME|LC_ALL|GIT_(TERMINAL_PROMPT|PAGER|EDITOR|CONFIG_NOSYSTEM|CONFIG_GLOBAL|CONFIG_SYSTEM|ATTR_NOSYSTEM|CONFIG_COUNT|CONFIG_KEY_\d+|CONFIG_VALUE_\d+|AUTHOR_NAME|AUTHOR_EMAIL|COMMITTER_NAME|COMMITTER_EMAIL))=/
    for (const env of environments) {
      expect(env.filter((entry) => !allowed.test(entry))).toEqual([])
      expect(env.join('\n')).not.toContain('sk-secret-in-the-parent')
    }
  })

  it("the person's identity and global ignore file still apply to dsh's commits and to what a child changed, although dsh's git reads no global config", async () => {
    const repo = repository()
    const ignore = join(temp(), 'ignore')
    writeFileSync(ignore, '*.swp\n')
    const global = join(temp(), 'gitconfig')
    writeFileSync(global, `[user]\n\tname = The Person\n\temail = person@example.test\n[core]\n\texcludesFile = ${ignore}\n`)
    process.env.GIT_CONFIG_GLOBAL = global
    for (const name of ['GIT_AUTHOR_NAME', 'GIT_AUTHOR_EMAIL', 'GIT_COMMITTER_NAME', 'GIT_COMMITTER_EMAIL']) delete process.env[name]
    const workspaces = await service()
    const { ref } = await workspaces.create({ mode: 'worktree', source: repo, childId: 'c', tree: 'root', ...byRoot })
    writeFileSync(join(ref.path, 'kept.txt'), 'kept\n')
    writeFileSync(join(ref.path, '.kept.txt.swp'), 'editor state\n')
    expect((await workspaces.changes('c')).files.map((file) => file.path)).toEqual(['kept.txt'])
    expect(await workspaces.merge('c')).toMatchObject({ ok: true, files: [{ path: 'kept.txt' }] })
    // The merge, and the commit of what the child left uncommitted (the merge's second parent).
    for (const commit of ['HEAD', 'HEAD^2']) expect(sh(repo, 'log', '-1', '--format=%an <%ae> / %cn <%ce>', commit).trim()).toBe('The Person <person@example.test> / The Person <person@example.test>')
    expect(sh(repo, 'ls-files')).not.toContain('.swp')
    expect(existsSync(join(repo, 'kept.txt'))).toBe(true)
  })
})
