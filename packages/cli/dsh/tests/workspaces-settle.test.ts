/**
 * `dsh workspaces merge | discard | clean --all`, through the built CLI, on a real git
 * repository and workspaces a real `dsh run` kept: a person brings a kept worktree's
 * changes (uncommitted ones included) into the directory it was made from, or throws it
 * away; a conflict lists the files and leaves the main tree exactly as it was; what would
 * lose changes needs --yes without a terminal.
 */
import { existsSync, readFileSync, readdirSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { runDsh } from './cli.js'
import { GIT_ENV, git, keptWorkspaces } from './workspaces-kept.js'

/** What the main tree is, to compare before and after: its commit, status, index, file and merge state. */
function treeState(repo: string): Record<string, unknown> {
  return {
    head: git(repo, 'rev-parse', 'HEAD'),
    status: git(repo, 'status', '--porcelain', '--untracked-files=all'),
    index: git(repo, 'ls-files', '--stage'),
    notes: readFileSync(join(repo, 'notes.txt'), 'utf8'),
    files: readdirSync(repo).sort(),
    merging: existsSync(join(repo, '.git', 'MERGE_HEAD')),
  }
}

describe('dsh workspaces merge', () => {
  it("brings a kept worktree's uncommitted edit and new file into the directory it was made from, and removes the workspace and its branch", async () => {
    const { repo, home, ids } = await keptWorkspaces([2])
    // Its branch alone brings nothing: the child committed nothing.
    expect(git(repo, 'diff', 'main', git(repo, 'branch', '--list', '--format=%(refname:short)', 'dsh/*').trim())).toBe('')
    const merged = await runDsh(['workspaces', 'merge', ids[0]!], { env: { DSH_HOME: home, ...GIT_ENV } })
    expect(merged.code, merged.stderr).toBe(0)
    expect(merged.stdout).toMatch(/^merged dsh\/line-2-\S+: 2 files changed, 2 insertions\(\+\), 1 deletion\(-\) \(commit [0-9a-f]{12}\) into /)
    expect(readFileSync(join(repo, 'notes.txt'), 'utf8')).toContain('line 2, by child 2')
    expect(readFileSync(join(repo, 'new-2.txt'), 'utf8')).toBe('new\n')
    expect(git(repo, 'status', '--porcelain')).toBe('')
    expect(git(repo, 'branch', '--list', 'dsh/*')).toBe('')
    expect(git(repo, 'worktree', 'list').trim().split('\n')).toHaveLength(1)
    expect((await runDsh(['workspaces', 'list'], { env: { DSH_HOME: home } })).stdout).toMatch(/^no workspaces/)
  })

  it('on a conflict lists the conflicting file and leaves the main tree exactly as it was; the workspace stays to settle', async () => {
    const { repo, home, ids } = await keptWorkspaces([2])
    // The same line changed in the main tree since, committed; and an untracked file of the person's own.
    writeFileSync(join(repo, 'notes.txt'), readFileSync(join(repo, 'notes.txt'), 'utf8').replace('line 2\n', 'line 2, by hand\n'))
    git(repo, 'commit', '--quiet', '-am', 'by hand')
    writeFileSync(join(repo, 'scratch.txt'), 'mine\n')
    const before = treeState(repo)
    const merged = await runDsh(['workspaces', 'merge', ids[0]!], { env: { DSH_HOME: home, ...GIT_ENV } })
    expect(merged.code, merged.stderr).toBe(1)
    expect(merged.stdout).toMatch(/^merging dsh\/line-2-\S+ conflicts in notes\.txt; nothing was changed \(the branch and its workspace are kept\)\nconflicting files:\n {2}notes\.txt\n$/)
    expect(treeState(repo)).toEqual(before)
    const listed = await runDsh(['workspaces', 'list'], { env: { DSH_HOME: home } })
    expect(listed.stdout).toContain(`${ids[0]}  worktree dsh/line-2-`)
    expect(listed.stdout).toContain('kept (changes to merge or discard)')
  })

  it('an unknown id is one line naming it and where the ids are, and changes nothing', async () => {
    const { repo, home, ids } = await keptWorkspaces([2])
    const before = treeState(repo)
    for (const verb of ['merge', 'discard']) {
      const result = await runDsh(['workspaces', verb, 'no-such-child'], { env: { DSH_HOME: home } })
      expect(result.code).toBe(2)
      expect(result.stderr).toBe(`dsh workspaces ${verb}: no workspace "no-such-child" in ${join(home, 'workspaces')} (dsh workspaces list shows each one's id first on its line)\n`)
    }
    expect(treeState(repo)).toEqual(before)
    expect((await runDsh(['workspaces', 'list'], { env: { DSH_HOME: home } })).stdout).toContain(ids[0]!)
  })
})

describe('what a person may not settle', () => {
  it('a workspace a running dsh still works in is refused by merge and discard in one line, and nothing is touched', async () => {
    const { repo, home, ids } = await keptWorkspaces([2])
    // As its run would have it while the child works: live, held by a process that is alive (this one).
    const records = join(home, 'workspaces', 'records')
    const [name] = readdirSync(records)
    const record = JSON.parse(readFileSync(join(records, name!), 'utf8')) as Record<string, unknown>
    writeFileSync(join(records, name!), JSON.stringify({ ...record, state: 'live', pid: process.pid }))
    const before = treeState(repo)
    for (const args of [['merge', ids[0]!], ['discard', '--yes', ids[0]!]]) {
      const result = await runDsh(['workspaces', ...args], { env: { DSH_HOME: home, ...GIT_ENV } })
      expect(result.code).toBe(2)
      expect(result.stderr).toBe(`dsh workspaces ${args[0]} ${ids[0]}: it is in use by process ${process.pid} (its child is still working in it); ${args[0]} it once that run has ended\n`)
    }
    expect(treeState(repo)).toEqual(before)
    expect(git(repo, 'branch', '--list', 'dsh/*')).not.toBe('')
    expect(readFileSync(join(String(record.path), 'notes.txt'), 'utf8')).toContain('by child 2')
  })
})

describe('dsh workspaces discard and clean --all without a terminal', () => {
  it('discard of a workspace holding changes is refused in one line without --yes, and with it the workspace and its branch go', async () => {
    const { repo, home, ids } = await keptWorkspaces([2])
    const refused = await runDsh(['workspaces', 'discard', ids[0]!], { env: { DSH_HOME: home } })
    expect(refused.code).toBe(2)
    expect(refused.stderr).toMatch(new RegExp(`^dsh workspaces discard ${ids[0]}: its worktree dsh/line-2-\\S+ of \\S+ holds changes \\(2 files changed, 2 insertions\\(\\+\\), 1 deletion\\(-\\)\\); pass --yes to throw them away\\n$`))
    expect(git(repo, 'branch', '--list', 'dsh/*')).not.toBe('')
    const discarded = await runDsh(['workspaces', 'discard', '--yes', ids[0]!], { env: { DSH_HOME: home } })
    expect(discarded.code, discarded.stderr).toBe(0)
    expect(discarded.stdout).toMatch(/^discarded \S+ and branch dsh\/line-2-\S+ \(subagent /)
    expect(git(repo, 'branch', '--list', 'dsh/*')).toBe('')
    expect(git(repo, 'worktree', 'list').trim().split('\n')).toHaveLength(1)
    expect(readFileSync(join(repo, 'notes.txt'), 'utf8')).not.toContain('child')
  })

  it('clean --all that would remove kept changes is refused in one line without --yes, removing nothing; with --yes it removes them', async () => {
    const { repo, home } = await keptWorkspaces([2, 5])
    const refused = await runDsh(['workspaces', 'clean', '--all'], { env: { DSH_HOME: home } })
    expect(refused.code).toBe(2)
    expect(refused.stderr).toBe('dsh workspaces clean --all would remove 2 workspaces that are not orphaned (2 holding changes); pass --yes to remove them, or leave out --all to remove only the orphaned ones\n')
    expect(git(repo, 'branch', '--list', 'dsh/*').trim().split('\n')).toHaveLength(2)
    expect((await runDsh(['workspaces', 'list'], { env: { DSH_HOME: home } })).stdout.trim().split('\n')).toHaveLength(2)
    const cleaned = await runDsh(['workspaces', 'clean', '--all', '--yes'], { env: { DSH_HOME: home } })
    expect(cleaned.code, cleaned.stderr).toBe(0)
    expect(cleaned.stdout).toContain('2 workspaces removed')
    expect(git(repo, 'branch', '--list', 'dsh/*')).toBe('')
  })
})
