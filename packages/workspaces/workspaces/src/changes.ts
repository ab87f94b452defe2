/**
 * What a child changed in its workspace, read from git: its commits since the workspace's
 * base and what it left uncommitted, untracked files included. A copy is tracked by a git
 * directory of dsh's own outside the copy (`gitDir`), so the child never sees one.
 */
import { existsSync } from 'node:fs'
import { WorkspaceError } from './errors.js'
import { git, gitResult, lastLines } from './git.js'
import type { ChangedFile, WorkspaceChanges, WorkspaceRecord } from './types.js'

/**
 * The git arguments that address a workspace's repository, never read from inside the
 * workspace (a child could have rewritten its `.git` file to point git at hooks or config
 * of its own): a worktree's administrative directory recorded when it was made, or a
 * copy's git directory outside it. (Every command of dsh's own runs with hooks, the
 * file-system monitor, filters and drivers off: see `gitResult`.)
 */
export function gitArgs(record: WorkspaceRecord, gitDir: string | undefined): string[] {
  const dir = gitDir ?? record.worktreeGitDir
  return dir === undefined ? [] : [`--git-dir=${dir}`, `--work-tree=${record.root}`]
}

/**
 * The git arguments for the parent's tree: none for a tree of the person's own; for a
 * workspace of ours (a grandchild's made from, or merged into, its parent's worktree) its
 * administrative directory recorded when it was made, with hooks and the monitor off, never
 * its `.git` file, which the child working there could have rewritten.
 */
export function parentTreeArgs(holder: WorkspaceRecord | undefined): string[] {
  if (holder === undefined) return []
  if (holder.worktreeGitDir === undefined) throw new WorkspaceError('NOT_A_REPOSITORY', `subagent ${holder.childId}'s worktree has no recorded git directory (it was never finished), so dsh will not run git in it`)
  return gitArgs(holder, undefined)
}

/**
 * What `status` and `diff` of dsh's own add: no external diff or text conversion, and never
 * a look inside a nested repository (a child may commit one; git would run `status` in it,
 * with the config the child gave it). Set by `gitResult`'s config too; said again here so
 * each command reads safely on its own.
 */
export const READ_ONLY_DIFF = ['--no-ext-diff', '--no-textconv', '--ignore-submodules=dirty'] as const

export async function readChanges(record: WorkspaceRecord, gitDir: string | undefined): Promise<WorkspaceChanges> {
  const base: WorkspaceChanges = { childId: record.childId, mode: record.mode, path: record.path, ...(record.branch !== undefined && { branch: record.branch }), files: [], diffstat: 'no changes', committed: false, uncommitted: false }
  if (!existsSync(record.root)) return { ...base, missing: true }
  const at = gitArgs(record, gitDir)
  const committed = record.mode === 'worktree' && Number((await git(record.root, [...at, 'rev-list', '--count', `${record.base}..HEAD`], 'counting the child\'s commits')).trim()) > 0
  const status = await git(record.root, [...at, 'status', '--porcelain', '-z', '--untracked-files=all', '--ignore-submodules=dirty'], 'reading the workspace\'s status')
  const uncommitted = status !== ''
  const files = new Map<string, ChangedFile>()
  // Everything since the base, in the working tree (committed or not), tracked files.
  for (const [path, status] of nameStatus(await git(record.root, [...at, 'diff', ...READ_ONLY_DIFF, '--no-renames', '--name-status', '-z', record.base], 'listing the changed files'))) {
    files.set(path, { path, status })
  }
  for (const [path, added, removed] of numstat(await git(record.root, [...at, 'diff', ...READ_ONLY_DIFF, '--no-renames', '--numstat', '-z', record.base], 'counting the changed lines'))) {
    const file = files.get(path)
    if (file && added !== undefined) Object.assign(file, { added, removed })
  }
  // Untracked files (not ignored) are additions too.
  for (const path of (await git(record.root, [...at, 'ls-files', '--others', '--exclude-standard', '-z'], 'listing new files')).split('\0').filter(Boolean)) {
    if (!files.has(path)) files.set(path, { path, status: 'added', ...(await countLines(record, gitDir, path)) })
  }
  const list = [...files.values()].sort((a, b) => a.path.localeCompare(b.path))
  return { ...base, files: list, diffstat: diffstat(list), committed, uncommitted }
}

/** `git diff --name-status -z`: status letter, then the path. */
function nameStatus(output: string): Array<[string, ChangedFile['status']]> {
  const parts = output.split('\0')
  const found: Array<[string, ChangedFile['status']]> = []
  for (let index = 0; index + 1 < parts.length; index += 2) {
    const letter = parts[index]![0]
    const status = letter === 'A' ? 'added' : letter === 'D' ? 'deleted' : 'modified'
    found.push([parts[index + 1]!, status])
  }
  return found
}

/** `git diff --numstat -z`: added, removed and path per record (`-` for a binary file). */
function numstat(output: string): Array<[string, number | undefined, number | undefined]> {
  return output
    .split('\0')
    .filter(Boolean)
    .map((record) => {
      const [added, removed, ...path] = record.split('\t')
      const binary = added === '-'
      return [path.join('\t'), binary ? undefined : Number(added), binary ? undefined : Number(removed)]
    })
}

async function countLines(record: WorkspaceRecord, gitDir: string | undefined, path: string): Promise<{ added?: number; removed?: number }> {
  // `--no-index` diff against /dev/null counts an untracked file's lines as git would; after `--`, a file named like an option (`--output=…`) is only a path.
  const result = await gitResult(record.root, [...gitArgs(record, gitDir), 'diff', '--no-ext-diff', '--no-textconv', '--no-index', '--numstat', '-z', '--', '/dev/null', path])
  const [parsed] = numstat(result.stdout)
  return parsed && parsed[1] !== undefined ? { added: parsed[1], removed: 0 } : {}
}

/** `3 files changed, 10 insertions(+), 2 deletions(-)`, as git says it. */
export function diffstat(files: readonly ChangedFile[]): string {
  if (files.length === 0) return 'no changes'
  const added = files.reduce((sum, file) => sum + (file.added ?? 0), 0)
  const removed = files.reduce((sum, file) => sum + (file.removed ?? 0), 0)
  return `${files.length} ${files.length === 1 ? 'file' : 'files'} changed, ${added} ${added === 1 ? 'insertion' : 'insertions'}(+), ${removed} ${removed === 1 ? 'deletion' : 'deletions'}(-)`
}

/**
 * Stage everything the child left uncommitted, as `git add --all` would, except nested
 * repositories: `add` looks inside each one it tracks (a `status` there, under the config
 * the child gave it, filters included), so the files are named to `update-index`, which
 * does not. A nested repository the child committed stays as it committed it; one it did
 * not is left out. Whether anything was staged.
 */
export async function stageAll(root: string, at: readonly string[]): Promise<boolean> {
  const what = 'committing what the child left uncommitted'
  const nested = new Set((await git(root, [...at, 'ls-files', '--stage', '-z'], what)).split('\0').filter((entry) => entry.startsWith('160000 ')).map((entry) => entry.slice(entry.indexOf('\t') + 1)))
  const listed = (await git(root, [...at, 'ls-files', '--modified', '--deleted', '--others', '--exclude-standard', '-z'], what)).split('\0')
  // An untracked nested repository is listed as its directory (`name/`).
  const paths = [...new Set(listed)].filter((path) => path !== '' && !path.endsWith('/') && !nested.has(path))
  if (paths.length === 0) return false
  const staged = await gitResult(root, [...at, 'update-index', '--add', '--remove', '-z', '--stdin'], { input: `${paths.join('\0')}\0` })
  if (staged.code !== 0) throw new WorkspaceError('GIT_FAILED', `${what}: git update-index failed: ${lastLines(staged.stderr || staged.stdout)}`)
  return true
}
