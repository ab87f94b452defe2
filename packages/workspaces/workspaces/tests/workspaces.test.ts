/**
 * Workspaces on real git repositories the tests make: worktrees on branches of their own,
 * copies of plain directories, what a child changed, merging back (with its conflicts),
 * discarding, and what a killed process leaves behind.
 */
import { execFileSync, spawnSync } from 'node:child_process'
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { Context } from 'cordis'
import { WorkspaceService, type WorkspaceError } from '@dsh/workspaces'

const made: string[] = []
afterEach(() => {
  for (const dir of made.splice(0)) rmSync(dir, { recursive: true, force: true })
})

const GIT_ENV = { ...process.env, GIT_AUTHOR_NAME: 'test', GIT_AUTHOR_EMAIL: 'test@localhost', GIT_COMMITTER_NAME: 'test', GIT_COMMITTER_EMAIL: 'test@localhost' }
const sh = (cwd: string, ...args: string[]) => execFileSync('git', args, { cwd, env: GIT_ENV, encoding: 'utf8' })

function temp(prefix = 'dsh-ws-'): string {
  const dir = mkdtempSync(join(tmpdir(), prefix))
  made.push(dir)
  return dir
}

/** A repository with one committed file of ten numbered lines. */
function repository(name = 'repo'): string {
  const dir = join(temp(), name)
  mkdirSync(dir)
  sh(dir, 'init', '--quiet', '-b', 'main')
  writeFileSync(join(dir, 'notes.txt'), Array.from({ length: 10 }, (_, index) => `line ${index + 1}`).join('\n') + '\n')
  sh(dir, 'add', '.')
  sh(dir, 'commit', '--quiet', '-m', 'start')
  return dir
}

async function service(config: Partial<WorkspaceService.Config> = {}) {
  const ctx = new Context()
  await ctx.plugin(WorkspaceService, { dir: temp('dsh-ws-home-'), ...config })
  return ctx.workspaces
}

/** Replace line `n` (1-based) of a file. */
function editLine(file: string, n: number, text: string): void {
  const lines = readFileSync(file, 'utf8').split('\n')
  lines[n - 1] = text
  writeFileSync(file, lines.join('\n'))
}

const refusal = async (promise: Promise<unknown>) => promise.then(() => { throw new Error('expected a refusal') }, (error: WorkspaceError) => error)

describe('worktree workspaces', () => {
  it('three children edit the same file on their own branches; the parent is untouched until it merges; two non-overlapping merges succeed, the third reports its conflict', async () => {
    const repo = repository()
    const workspaces = await service()
    const children = await Promise.all(['first', 'second', 'third'].map((label, index) => workspaces.create({ mode: 'worktree', source: repo, childId: `child-${index + 1}`, label, tree: 'root' })))
    for (const { ref } of children) expect(ref).toMatchObject({ mode: 'worktree', source: repo, branch: expect.stringMatching(/^dsh\//) })
    editLine(join(children[0]!.ref.path, 'notes.txt'), 2, 'line 2, by the first child')
    editLine(join(children[1]!.ref.path, 'notes.txt'), 9, 'line 9, by the second child')
    editLine(join(children[2]!.ref.path, 'notes.txt'), 2, 'line 2, by the third child')
    for (const { ref } of children) sh(ref.path, 'commit', '--quiet', '-am', 'my edit')
    expect(readFileSync(join(repo, 'notes.txt'), 'utf8')).not.toContain('child')
    const changes = await workspaces.changes('child-1')
    expect(changes).toMatchObject({ committed: true, uncommitted: false, files: [{ path: 'notes.txt', status: 'modified', added: 1, removed: 1 }], diffstat: '1 file changed, 1 insertion(+), 1 deletion(-)' })
    expect(await workspaces.merge('child-1')).toMatchObject({ ok: true })
    expect(await workspaces.merge('child-2')).toMatchObject({ ok: true })
    const third = await workspaces.merge('child-3')
    expect(third).toEqual({ ok: false, childId: 'child-3', conflicts: ['notes.txt'], summary: expect.stringContaining('conflicts in notes.txt') })
    const merged = readFileSync(join(repo, 'notes.txt'), 'utf8')
    expect(merged).toContain('line 2, by the first child')
    expect(merged).toContain('line 9, by the second child')
    expect(merged).not.toContain('third')
    // The failed merge left the parent's tree clean, and the third child's branch and workspace kept.
    expect(sh(repo, 'status', '--porcelain')).toBe('')
    expect(existsSync(children[2]!.ref.path)).toBe(true)
    expect(existsSync(children[0]!.ref.path)).toBe(false)
    expect(sh(repo, 'branch', '--list', 'dsh/*').trim().split('\n')).toHaveLength(1)
  })

  it('what a child left uncommitted is committed on its branch when it is merged, new files included', async () => {
    const repo = repository()
    const workspaces = await service()
    const { ref } = await workspaces.create({ mode: 'worktree', source: repo, childId: 'c1', label: 'writer', tree: 'root' })
    writeFileSync(join(ref.path, 'new file.txt'), 'fresh\n')
    editLine(join(ref.path, 'notes.txt'), 5, 'five')
    expect(await workspaces.changes('c1')).toMatchObject({ committed: false, uncommitted: true, files: [{ path: 'new file.txt', status: 'added', added: 1 }, { path: 'notes.txt', status: 'modified' }] })
    expect(await workspaces.merge('c1')).toMatchObject({ ok: true, summary: expect.stringContaining('2 files changed') })
    expect(readFileSync(join(repo, 'new file.txt'), 'utf8')).toBe('fresh\n')
    expect(sh(repo, 'log', '--format=%s', '-3')).toContain('dsh: what writer left uncommitted')
  })

  it('a workspace with no changes is removed when its child is done; one with changes is kept', async () => {
    const repo = repository()
    const workspaces = await service()
    const idle = await workspaces.create({ mode: 'worktree', source: repo, childId: 'idle', tree: 'root' })
    const busy = await workspaces.create({ mode: 'worktree', source: repo, childId: 'busy', tree: 'root' })
    writeFileSync(join(busy.ref.path, 'x.txt'), 'x\n')
    expect(await workspaces.release('idle')).toBeUndefined()
    expect(existsSync(idle.ref.path)).toBe(false)
    expect(await workspaces.release('busy')).toMatchObject({ files: [{ path: 'x.txt' }] })
    expect((await workspaces.list()).map((record) => [record.childId, record.state])).toEqual([['busy', 'kept']])
    await workspaces.discard('busy')
    expect(existsSync(busy.ref.path)).toBe(false)
    expect(sh(repo, 'branch', '--list', 'dsh/*')).toBe('')
    expect(await workspaces.list()).toEqual([])
  })

  it('refuses, with a clear error and no damage: a directory that is not a repository, a dirty tree, a repository with submodules, a branch that exists, more than maxLivePerTree', async () => {
    const workspaces = await service({ maxLivePerTree: 2 })
    expect(await refusal(workspaces.create({ mode: 'worktree', source: temp(), childId: 'a', tree: 'root' }))).toMatchObject({ code: 'NOT_A_REPOSITORY', message: expect.stringContaining('use workspace: copy') })
    const dirty = repository()
    editLine(join(dirty, 'notes.txt'), 1, 'changed')
    expect(await refusal(workspaces.create({ mode: 'worktree', source: dirty, childId: 'b', tree: 'root' }))).toMatchObject({ code: 'DIRTY_TREE', message: expect.stringContaining('notes.txt') })
    expect(sh(dirty, 'status', '--porcelain')).toContain('notes.txt')
    const withModule = repository('outer')
    const inner = repository('inner')
    sh(withModule, '-c', 'protocol.file.allow=always', 'submodule', 'add', '--quiet', inner, 'inner')
    sh(withModule, 'commit', '--quiet', '-m', 'a submodule')
    expect(await refusal(workspaces.create({ mode: 'worktree', source: withModule, childId: 'c', tree: 'root' }))).toMatchObject({ code: 'SUBMODULES' })
    const repo = repository()
    await workspaces.create({ mode: 'worktree', source: repo, childId: 'd1', tree: 'root' })
    await workspaces.create({ mode: 'worktree', source: repo, childId: 'd2', tree: 'root' })
    expect(await refusal(workspaces.create({ mode: 'worktree', source: repo, childId: 'd3', tree: 'root' }))).toMatchObject({ code: 'TOO_MANY' })
    // Another tree has its own count.
    await workspaces.create({ mode: 'worktree', source: repo, childId: 'e1', tree: 'other' })
    expect(sh(repo, 'worktree', 'list').trim().split('\n')).toHaveLength(4)
  })

  it('a parent directory with spaces and a newline in its path works; the child works in the same subdirectory', async () => {
    const repo = repository('a repo\nwith a newline')
    mkdirSync(join(repo, 'sub dir'))
    writeFileSync(join(repo, 'sub dir', 'f.txt'), 'f\n')
    sh(repo, 'add', '.')
    sh(repo, 'commit', '--quiet', '-m', 'sub')
    const workspaces = await service()
    const { ref } = await workspaces.create({ mode: 'worktree', source: join(repo, 'sub dir'), childId: 'c', label: 'a label / with: odd chars', tree: 'root' })
    expect(ref.path.endsWith(join('', 'sub dir'))).toBe(true)
    expect(ref.branch).toMatch(/^dsh\/a-label-with-odd-chars-/)
    writeFileSync(join(ref.path, 'f.txt'), 'changed\n')
    expect(await workspaces.merge('c')).toMatchObject({ ok: true })
    expect(readFileSync(join(repo, 'sub dir', 'f.txt'), 'utf8')).toBe('changed\n')
  })

  it('a child that deletes its own worktree: its changes say the directory is gone, and discarding it still cleans up the branch', async () => {
    const repo = repository()
    const workspaces = await service()
    const { record } = await workspaces.create({ mode: 'worktree', source: repo, childId: 'c', tree: 'root' })
    rmSync(record.root, { recursive: true, force: true })
    expect(await workspaces.changes('c')).toMatchObject({ missing: true, files: [] })
    expect(await workspaces.release('c')).toMatchObject({ missing: true })
    await workspaces.discard('c')
    expect(sh(repo, 'branch', '--list', 'dsh/*')).toBe('')
    expect(sh(repo, 'worktree', 'list').trim().split('\n')).toHaveLength(1)
  })

  it('a process killed with its workspaces live leaves records another process finds as orphans, and clean removes them with their branches', async () => {
    const repo = repository()
    const home = temp('dsh-ws-home-')
    // Another process makes a workspace and is killed before it can clean up.
    const script = `
      import { Context } from 'cordis'
      import { WorkspaceService } from '@dsh/workspaces'
      const ctx = new Context()
      await ctx.plugin(WorkspaceService, { dir: ${JSON.stringify(home)} })
      await ctx.workspaces.create({ mode: 'worktree', source: ${JSON.stringify(repo)}, childId: 'orphan', tree: 'root' })
      process.kill(process.pid, 'SIGKILL')
    `
    const file = join(process.cwd(), 'packages/workspaces/workspaces/tests', `.orphan-${process.pid}.mjs`)
    writeFileSync(file, script)
    try {
      spawnSync(process.execPath, [file], { env: GIT_ENV, stdio: 'ignore' })
    } finally {
      rmSync(file, { force: true })
    }
    const workspaces = await service({ dir: home })
    const listed = await workspaces.list()
    expect(listed.map((record) => [record.childId, record.orphaned])).toEqual([['orphan', true]])
    expect(existsSync(listed[0]!.root)).toBe(true)
    expect((await workspaces.clean()).map((record) => record.childId)).toEqual(['orphan'])
    expect(existsSync(listed[0]!.root)).toBe(false)
    expect(sh(repo, 'branch', '--list', 'dsh/*')).toBe('')
    expect(await workspaces.list()).toEqual([])
  })
})

describe('a worktree the child tampered with', () => {
  it("dsh's own git never follows a rewritten .git file of the worktree: a planted fsmonitor or hook does not run, and the changes are read from the real repository", async () => {
    const repo = repository()
    const workspaces = await service()
    const { ref, record } = await workspaces.create({ mode: 'worktree', source: repo, childId: 'c', tree: 'root' })
    writeFileSync(join(ref.path, 'x.txt'), 'x\n')
    // The child points its worktree at a repository of its own whose config runs a program on status.
    const evil = temp('dsh-evil-')
    const marker = join(evil, 'ran')
    sh(evil, 'init', '--quiet')
    sh(evil, 'config', 'core.fsmonitor', `touch ${marker}; false`)
    mkdirSync(join(evil, '.git', 'hooks'), { recursive: true })
    writeFileSync(join(evil, '.git', 'hooks', 'pre-commit'), `#!/bin/sh\ntouch ${marker}\n`, { mode: 0o755 })
    writeFileSync(join(record.root, '.git'), `gitdir: ${join(evil, '.git')}\n`)
    expect((await workspaces.changes('c')).files.map((file) => file.path)).toContain('x.txt')
    expect(await workspaces.merge('c')).toMatchObject({ ok: true })
    expect(existsSync(marker)).toBe(false)
    expect(readFileSync(join(repo, 'x.txt'), 'utf8')).toBe('x\n')
  })
})

describe('copy workspaces', () => {
  it('a copy of a plain directory: the child sees no git directory, its changes are listed, and merging writes them back', async () => {
    const source = temp()
    writeFileSync(join(source, 'a.txt'), 'a\n')
    writeFileSync(join(source, 'gone.txt'), 'gone\n')
    const workspaces = await service()
    const { ref } = await workspaces.create({ mode: 'copy', source, childId: 'c', tree: 'root' })
    expect(existsSync(join(ref.path, '.git'))).toBe(false)
    writeFileSync(join(ref.path, 'a.txt'), 'a, changed\n')
    writeFileSync(join(ref.path, 'b.txt'), 'b\n')
    rmSync(join(ref.path, 'gone.txt'))
    expect((await workspaces.changes('c')).files.map((file) => [file.path, file.status])).toEqual([['a.txt', 'modified'], ['b.txt', 'added'], ['gone.txt', 'deleted']])
    expect(readFileSync(join(source, 'a.txt'), 'utf8')).toBe('a\n')
    expect(await workspaces.merge('c')).toMatchObject({ ok: true })
    expect(readFileSync(join(source, 'a.txt'), 'utf8')).toBe('a, changed\n')
    expect(readFileSync(join(source, 'b.txt'), 'utf8')).toBe('b\n')
    expect(existsSync(join(source, 'gone.txt'))).toBe(false)
  })

  it('a file changed in the parent since the copy was made is a conflict, and nothing is written back', async () => {
    const source = temp()
    writeFileSync(join(source, 'a.txt'), 'a\n')
    writeFileSync(join(source, 'b.txt'), 'b\n')
    const workspaces = await service()
    const { ref } = await workspaces.create({ mode: 'copy', source, childId: 'c', tree: 'root' })
    writeFileSync(join(ref.path, 'a.txt'), 'child\n')
    writeFileSync(join(ref.path, 'b.txt'), 'child b\n')
    writeFileSync(join(source, 'a.txt'), 'parent\n')
    const outcome = await workspaces.merge('c')
    expect(outcome).toMatchObject({ ok: false, conflicts: ['a.txt'] })
    expect(readFileSync(join(source, 'a.txt'), 'utf8')).toBe('parent\n')
    expect(readFileSync(join(source, 'b.txt'), 'utf8')).toBe('b\n')
    expect(existsSync(ref.path)).toBe(true)
  })
})
