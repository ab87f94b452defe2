/**
 * Workspaces on real git repositories the tests make: worktrees on branches of their own,
 * copies of plain directories, what a child changed, merging back (with its conflicts),
 * discarding, and what a killed process leaves behind.
 */
import { execFileSync, spawnSync } from 'node:child_process'
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
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

/** Made by the tree's root agent itself (the delegating agent is `root`, with no ancestors). */
const byRoot = { parentAgent: 'root', ancestorAgents: [] as string[] }

const refusal = async (promise: Promise<unknown>) => promise.then(() => { throw new Error('expected a refusal') }, (error: WorkspaceError) => error)

describe('worktree workspaces', () => {
  it('three children edit the same file on their own branches; the parent is untouched until it merges; two non-overlapping merges succeed, the third reports its conflict', async () => {
    const repo = repository()
    const workspaces = await service()
    const children = await Promise.all(['first', 'second', 'third'].map((label, index) => workspaces.create({ mode: 'worktree', source: repo, childId: `child-${index + 1}`, label, tree: 'root', ...byRoot })))
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
    const { ref } = await workspaces.create({ mode: 'worktree', source: repo, childId: 'c1', label: 'writer', tree: 'root', ...byRoot })
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
    const idle = await workspaces.create({ mode: 'worktree', source: repo, childId: 'idle', tree: 'root', ...byRoot })
    const busy = await workspaces.create({ mode: 'worktree', source: repo, childId: 'busy', tree: 'root', ...byRoot })
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
    expect(await refusal(workspaces.create({ mode: 'worktree', source: temp(), childId: 'a', tree: 'root', ...byRoot }))).toMatchObject({ code: 'NOT_A_REPOSITORY', message: expect.stringContaining('use workspace: copy') })
    const dirty = repository()
    editLine(join(dirty, 'notes.txt'), 1, 'changed')
    expect(await refusal(workspaces.create({ mode: 'worktree', source: dirty, childId: 'b', tree: 'root', ...byRoot }))).toMatchObject({ code: 'DIRTY_TREE', message: expect.stringContaining('notes.txt') })
    expect(sh(dirty, 'status', '--porcelain')).toContain('notes.txt')
    const withModule = repository('outer')
    const inner = repository('inner')
    sh(withModule, '-c', 'protocol.file.allow=always', 'submodule', 'add', '--quiet', inner, 'inner')
    sh(withModule, 'commit', '--quiet', '-m', 'a submodule')
    expect(await refusal(workspaces.create({ mode: 'worktree', source: withModule, childId: 'c', tree: 'root', ...byRoot }))).toMatchObject({ code: 'SUBMODULES' })
    const repo = repository()
    await workspaces.create({ mode: 'worktree', source: repo, childId: 'd1', tree: 'root', ...byRoot })
    await workspaces.create({ mode: 'worktree', source: repo, childId: 'd2', tree: 'root', ...byRoot })
    expect(await refusal(workspaces.create({ mode: 'worktree', source: repo, childId: 'd3', tree: 'root', ...byRoot }))).toMatchObject({ code: 'TOO_MANY' })
    // Another tree has its own count.
    await workspaces.create({ mode: 'worktree', source: repo, childId: 'e1', tree: 'other', parentAgent: 'other', ancestorAgents: [] })
    expect(sh(repo, 'worktree', 'list').trim().split('\n')).toHaveLength(4)
  })

  it('a parent directory with spaces and a newline in its path works; the child works in the same subdirectory', async () => {
    const repo = repository('a repo\nwith a newline')
    mkdirSync(join(repo, 'sub dir'))
    writeFileSync(join(repo, 'sub dir', 'f.txt'), 'f\n')
    sh(repo, 'add', '.')
    sh(repo, 'commit', '--quiet', '-m', 'sub')
    const workspaces = await service()
    const { ref } = await workspaces.create({ mode: 'worktree', source: join(repo, 'sub dir'), childId: 'c', label: 'a label / with: odd chars', tree: 'root', ...byRoot })
    expect(ref.path.endsWith(join('', 'sub dir'))).toBe(true)
    expect(ref.branch).toMatch(/^dsh\/a-label-with-odd-chars-/)
    writeFileSync(join(ref.path, 'f.txt'), 'changed\n')
    expect(await workspaces.merge('c')).toMatchObject({ ok: true })
    expect(readFileSync(join(repo, 'sub dir', 'f.txt'), 'utf8')).toBe('changed\n')
  })

  it('a child that deletes its own worktree: its changes say the directory is gone, and discarding it still cleans up the branch', async () => {
    const repo = repository()
    const workspaces = await service()
    const { record } = await workspaces.create({ mode: 'worktree', source: repo, childId: 'c', tree: 'root', ...byRoot })
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
      await ctx.workspaces.create({ mode: 'worktree', source: ${JSON.stringify(repo)}, childId: 'orphan', tree: 'root', parentAgent: 'root', ancestorAgents: [] })
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
    const { ref, record } = await workspaces.create({ mode: 'worktree', source: repo, childId: 'c', tree: 'root', ...byRoot })
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
    const { ref } = await workspaces.create({ mode: 'copy', source, childId: 'c', tree: 'root', ...byRoot })
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
    const { ref } = await workspaces.create({ mode: 'copy', source, childId: 'c', tree: 'root', ...byRoot })
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

describe('merges and creations at once', () => {
  it('two copies merged into one directory at once are merged one after the other: the second finds the first one\'s write a conflict, and no change is lost', async () => {
    // A few rounds: the interleaving it guards against depends on timing.
    for (let round = 0; round < 4; round++) {
      const source = temp()
      writeFileSync(join(source, 'a.txt'), 'a\n')
      const workspaces = await service()
      const first = await workspaces.create({ mode: 'copy', source, childId: 'first', tree: 'root', ...byRoot })
      const second = await workspaces.create({ mode: 'copy', source, childId: 'second', tree: 'root', ...byRoot })
      writeFileSync(join(first.ref.path, 'a.txt'), 'by the first\n')
      writeFileSync(join(second.ref.path, 'a.txt'), 'by the second\n')
      const outcomes = await Promise.all([workspaces.merge('first'), workspaces.merge('second')])
      expect(outcomes.map((outcome) => outcome.ok).sort()).toEqual([false, true])
      const winner = outcomes.find((outcome) => outcome.ok)!.childId
      const loser = outcomes.find((outcome) => !outcome.ok)!
      expect(loser).toMatchObject({ conflicts: ['a.txt'] })
      // What the directory holds is the merged child's, and the other's copy is kept to settle.
      expect(readFileSync(join(source, 'a.txt'), 'utf8')).toBe(`by the ${winner}\n`)
      expect(existsSync((winner === 'first' ? second : first).ref.path)).toBe(true)
    }
  })

  it('two merges of the same copy at once: the first brings it back, the second finds it gone', async () => {
    const source = temp()
    writeFileSync(join(source, 'a.txt'), 'a\n')
    const workspaces = await service()
    const { ref } = await workspaces.create({ mode: 'copy', source, childId: 'c', tree: 'root', ...byRoot })
    writeFileSync(join(ref.path, 'a.txt'), 'changed\n')
    const [first, second] = await Promise.allSettled([workspaces.merge('c'), workspaces.merge('c')])
    expect(first).toMatchObject({ status: 'fulfilled', value: { ok: true } })
    expect(second).toMatchObject({ status: 'rejected', reason: { code: 'NOT_FOUND' } })
    expect(readFileSync(join(source, 'a.txt'), 'utf8')).toBe('changed\n')
  })

  it('workspaces being made count against maxLivePerTree: four asked at once with a limit of two make two', async () => {
    const source = temp()
    writeFileSync(join(source, 'a.txt'), 'a\n')
    const repo = repository()
    const workspaces = await service({ maxLivePerTree: 2 })
    for (const [mode, from] of [['copy', source], ['worktree', repo]] as const) {
      const settled = await Promise.allSettled(['1', '2', '3', '4'].map((n) => workspaces.create({ mode, source: from, childId: `${mode}-${n}`, tree: mode, parentAgent: mode, ancestorAgents: [] })))
      expect(settled.filter((outcome) => outcome.status === 'fulfilled')).toHaveLength(2)
      for (const outcome of settled.filter((outcome) => outcome.status === 'rejected')) expect(outcome).toMatchObject({ reason: { code: 'TOO_MANY' } })
    }
    expect((await workspaces.list()).filter((record) => !record.orphaned)).toHaveLength(4)
    expect(sh(repo, 'worktree', 'list').trim().split('\n')).toHaveLength(3)
  })
})

describe('nested workspaces', () => {
  /** A child's worktree, and a grandchild's worktree made from it (the child's directory as its source). */
  async function nested(workspaces: WorkspaceService) {
    const repo = repository()
    const child = await workspaces.create({ mode: 'worktree', source: repo, childId: 'child', label: 'child', tree: 'root', ...byRoot })
    const grandchild = await workspaces.create({ mode: 'worktree', source: child.ref.path, childId: 'grandchild', label: 'grandchild', tree: 'root', parentAgent: 'child', ancestorAgents: ['root'] })
    return { repo, child, grandchild }
  }

  it("a grandchild's worktree made from its parent's is recorded as derived from it, and is cleaned up through the recorded git directory after the parent's directory is gone", async () => {
    const workspaces = await service()
    const { repo, child, grandchild } = await nested(workspaces)
    expect(grandchild.record).toMatchObject({ derivedFrom: child.record.id, repository: child.record.root, gitDir: child.record.gitDir })
    writeFileSync(join(grandchild.ref.path, 'x.txt'), 'x\n')
    // The child's directory goes (the child deleted it, or its run was killed and it was cleaned by hand).
    rmSync(child.record.root, { recursive: true, force: true })
    expect(await refusal(workspaces.merge('grandchild'))).toMatchObject({ code: 'MERGE_REFUSED', message: expect.stringContaining('is gone') })
    await workspaces.discard('grandchild')
    expect(existsSync(grandchild.record.root)).toBe(false)
    expect(sh(repo, 'branch', '--list', grandchild.record.branch!)).toBe('')
    expect(sh(repo, 'worktree', 'list', '--porcelain')).not.toContain(grandchild.record.root)
  })

  it('a workspace others were made from is not discarded, merged, released or cleaned away while they live or are kept; with them gone it is', async () => {
    const workspaces = await service()
    const { repo, child, grandchild } = await nested(workspaces)
    writeFileSync(join(grandchild.ref.path, 'x.txt'), 'x\n')
    expect(await refusal(workspaces.discard('child'))).toMatchObject({ code: 'IN_USE', message: expect.stringContaining('grandchild') })
    expect(await refusal(workspaces.merge('child'))).toMatchObject({ code: 'IN_USE' })
    expect(await workspaces.release('grandchild')).toMatchObject({ files: [{ path: 'x.txt' }] })
    // The child changed nothing itself, but its grandchild's kept workspace still needs its directory.
    expect(await workspaces.release('child')).toMatchObject({ files: [] })
    expect(existsSync(child.ref.path)).toBe(true)
    expect((await workspaces.list()).map((record) => [record.childId, record.state])).toEqual(expect.arrayContaining([['child', 'kept'], ['grandchild', 'kept']]))
    // Merged into the child's worktree, the grandchild is gone and the child may go too.
    expect(await workspaces.merge('grandchild')).toMatchObject({ ok: true })
    expect(readFileSync(join(child.ref.path, 'x.txt'), 'utf8')).toBe('x\n')
    expect(await workspaces.merge('child')).toMatchObject({ ok: true })
    expect(readFileSync(join(repo, 'x.txt'), 'utf8')).toBe('x\n')
    expect(sh(repo, 'branch', '--list', 'dsh/*')).toBe('')
  })

  it("a child that rewrote its worktree's .git file: dsh's git follows it neither to make a grandchild's worktree from the child's nor to merge it back, so nothing planted runs and the merge lands on the child's real branch", async () => {
    const repo = repository()
    const workspaces = await service()
    const child = await workspaces.create({ mode: 'worktree', source: repo, childId: 'child', tree: 'root', ...byRoot })
    // All a confined child can write is its worktree: it makes a repository there whose config and hooks run a program, and points its .git file at it.
    const evil = join(child.record.root, '.evil')
    const marker = join(temp('dsh-evil-'), 'ran')
    mkdirSync(evil)
    sh(evil, 'init', '--quiet')
    sh(evil, 'commit', '--quiet', '--allow-empty', '-m', 'evil')
    sh(evil, 'config', 'core.fsmonitor', `touch ${marker}; false`)
    for (const hook of ['post-checkout', 'pre-merge-commit', 'post-merge']) writeFileSync(join(evil, '.git', 'hooks', hook), `#!/bin/sh\ntouch ${marker}\n`, { mode: 0o755 })
    writeFileSync(join(child.record.root, '.git'), `gitdir: ${join(evil, '.git')}\n`)
    const grandchild = await workspaces.create({ mode: 'worktree', source: child.ref.path, childId: 'grandchild', tree: 'root', parentAgent: 'child', ancestorAgents: ['root'] })
    expect(grandchild.record).toMatchObject({ gitDir: child.record.gitDir, base: sh(repo, 'rev-parse', child.record.branch!).trim() })
    writeFileSync(join(grandchild.ref.path, 'x.txt'), 'x\n')
    expect(await workspaces.merge('grandchild')).toMatchObject({ ok: true })
    expect(existsSync(marker)).toBe(false)
    expect(sh(repo, 'log', '--format=%s', '-1', child.record.branch!)).toContain(`dsh: merge ${grandchild.record.branch}`)
    expect(sh(repo, 'show', `${child.record.branch}:x.txt`)).toBe('x\n')
  })

  it("a worktree is not made from a copy's directory (it is not a repository)", async () => {
    const source = temp()
    writeFileSync(join(source, 'a.txt'), 'a\n')
    const workspaces = await service()
    const copy = await workspaces.create({ mode: 'copy', source, childId: 'child', tree: 'root', ...byRoot })
    expect(await refusal(workspaces.create({ mode: 'worktree', source: copy.ref.path, childId: 'grandchild', tree: 'root', parentAgent: 'child', ancestorAgents: ['root'] }))).toMatchObject({ code: 'NOT_A_REPOSITORY', message: expect.stringContaining("subagent child's copy") })
  })

  it('clean leaves an orphaned workspace that a kept one was made from, and clean --all removes both, the derived one first', async () => {
    const home = temp('dsh-ws-home-')
    const first = await service({ dir: home })
    const { repo, child, grandchild } = await nested(first)
    writeFileSync(join(grandchild.ref.path, 'x.txt'), 'x\n')
    await first.release('grandchild')
    // The child's process died with its workspace live: its record names a process that is gone.
    const gone = spawnSync(process.execPath, ['-e', '']).pid!
    const file = join(home, 'records', `${child.record.id}.json`)
    writeFileSync(file, JSON.stringify({ ...JSON.parse(readFileSync(file, 'utf8')), pid: gone }))
    const later = await service({ dir: home })
    expect((await later.list()).map((record) => [record.childId, record.orphaned])).toEqual(expect.arrayContaining([['child', true], ['grandchild', false]]))
    expect(await later.clean()).toEqual([])
    expect(existsSync(child.ref.path)).toBe(true)
    expect((await later.clean({ all: true })).map((record) => record.childId)).toEqual(['grandchild', 'child'])
    expect(existsSync(child.ref.path)).toBe(false)
    expect(sh(repo, 'branch', '--list', 'dsh/*')).toBe('')
    expect(sh(repo, 'worktree', 'list').trim().split('\n')).toHaveLength(1)
  })

  it('clean --all with only: of the workspaces that are not orphaned, those named alone go (one made after a person agreed stays)', async () => {
    const repo = repository()
    const workspaces = await service()
    const shown = await workspaces.create({ mode: 'worktree', source: repo, childId: 'shown', tree: 'root', ...byRoot })
    const later = await workspaces.create({ mode: 'worktree', source: repo, childId: 'later', tree: 'root', ...byRoot })
    expect((await workspaces.clean({ all: true, only: new Set([shown.record.id]) })).map((record) => record.childId)).toEqual(['shown'])
    expect(existsSync(shown.ref.path)).toBe(false)
    expect(existsSync(later.ref.path)).toBe(true)
    expect((await workspaces.list()).map((record) => record.childId)).toEqual(['later'])
  })
})

describe('git hardening', () => {
  it('a new file whose name looks like an option is counted as a file, never read by git as an option', async () => {
    const repo = repository()
    const workspaces = await service()
    const { ref } = await workspaces.create({ mode: 'worktree', source: repo, childId: 'c', tree: 'root', ...byRoot })
    writeFileSync(join(ref.path, '--output=stolen.txt'), 'one\ntwo\n')
    expect((await workspaces.changes('c')).files).toEqual([{ path: '--output=stolen.txt', status: 'added', added: 2, removed: 0 }])
    expect(existsSync(join(ref.path, 'stolen.txt'))).toBe(false)
  })

  it("a merge of the parent's own in progress is refused and left as it was, never aborted by dsh", async () => {
    const repo = repository()
    sh(repo, 'checkout', '--quiet', '-b', 'side')
    writeFileSync(join(repo, 'side.txt'), 'side\n')
    sh(repo, 'add', '.')
    sh(repo, 'commit', '--quiet', '-m', 'side')
    sh(repo, 'checkout', '--quiet', 'main')
    const workspaces = await service()
    const { ref } = await workspaces.create({ mode: 'worktree', source: repo, childId: 'c', tree: 'root', ...byRoot })
    writeFileSync(join(ref.path, 'x.txt'), 'x\n')
    // The person started a merge that changes nothing in the tree (so its status is clean), and has not concluded it.
    sh(repo, 'merge', '--quiet', '-s', 'ours', '--no-commit', 'side')
    const theirs = sh(repo, 'rev-parse', 'MERGE_HEAD').trim()
    expect(await refusal(workspaces.merge('c'))).toMatchObject({ code: 'MERGE_REFUSED', message: expect.stringContaining('middle of a merge') })
    expect(sh(repo, 'rev-parse', 'MERGE_HEAD').trim()).toBe(theirs)
    expect(existsSync(ref.path)).toBe(true)
  })

  it('a worktree that fails halfway (git cannot make its directory for it, after making its branch) leaves no branch, worktree or record behind', async () => {
    const repo = repository()
    // A file where git keeps its worktrees' directories: `worktree add` makes the branch, then fails.
    writeFileSync(join(repo, '.git', 'worktrees'), '')
    const workspaces = await service()
    expect(await refusal(workspaces.create({ mode: 'worktree', source: repo, childId: 'c', tree: 'root', ...byRoot }))).toMatchObject({ code: 'GIT_FAILED' })
    expect(sh(repo, 'branch', '--list', 'dsh/*')).toBe('')
    expect(sh(repo, 'worktree', 'list').trim().split('\n')).toHaveLength(1)
    expect(await workspaces.list()).toEqual([])
  })

  it('records on disk that dsh would never have written are orphans with a reason; clean removes only the record, never what it names', async () => {
    const home = temp('dsh-ws-home-')
    const repo = repository()
    const workspaces = await service({ dir: home })
    const { record } = await workspaces.create({ mode: 'worktree', source: repo, childId: 'good', tree: 'root', ...byRoot })
    const outside = temp('dsh-ws-outside-')
    writeFileSync(join(outside, 'precious.txt'), 'keep me\n')
    const forged = (id: string, fields: Record<string, unknown>) => writeFileSync(join(home, 'records', `${id}.json`), JSON.stringify({ ...record, id, childId: id, root: join(home, 'trees', id), path: join(home, 'trees', id), state: 'kept', ...fields }))
    forged('option-base', { base: '--output=/tmp/owned' })
    forged('outside-root', { root: outside, path: outside })
    forged('climbing-root', { root: `${join(home, 'trees')}/../../escape/climbing-root`, path: outside })
    forged('option-branch', { branch: '--force' })
    writeFileSync(join(home, 'records', 'not-json.json'), '{ nope')
    const listed = await workspaces.list()
    const invalid = listed.filter((entry) => entry.invalid !== undefined)
    expect(invalid.map((entry) => [entry.id, entry.orphaned])).toEqual([['climbing-root', true], ['not-json', true], ['option-base', true], ['option-branch', true], ['outside-root', true]])
    expect(Object.fromEntries(invalid.map((entry) => [entry.id, entry.invalid]))).toEqual({
      'climbing-root': expect.stringContaining('not in'),
      'not-json': expect.stringContaining('not JSON'),
      'option-base': expect.stringContaining('is not a commit id'),
      'option-branch': expect.stringContaining('branch'),
      'outside-root': expect.stringContaining('not in'),
    })
    // Acting on one by its child id finds no workspace: nothing it names is touched.
    expect(await refusal(workspaces.discard('outside-root'))).toMatchObject({ code: 'NOT_FOUND' })
    expect((await workspaces.clean()).map((entry) => entry.id).sort()).toEqual(['climbing-root', 'not-json', 'option-base', 'option-branch', 'outside-root'])
    expect(readFileSync(join(outside, 'precious.txt'), 'utf8')).toBe('keep me\n')
    expect(existsSync(record.root)).toBe(true)
    expect(sh(repo, 'branch', '--list', record.branch!).trim()).not.toBe('')
    expect(readdirSync(join(home, 'records'))).toEqual([`${record.id}.json`])
  })
})
