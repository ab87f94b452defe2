/**
 * Bringing a child's workspace back into the directory it was made from (`ctx.workspaces`'
 * `merge`, which runs these under the workspace's lock after checking it may): a worktree's
 * branch is merged into the parent's tree with git, a copy's changed files are written back.
 * Either changes nothing on a conflict and says which files; on success the workspace is
 * removed (`discard`, the service's).
 */
import { cpSync, existsSync, mkdirSync, rmSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { gitArgs, parentTreeArgs, READ_ONLY_DIFF, readChanges, stageAll } from './changes.js'
import { WorkspaceError } from './errors.js'
import { commitEnvironment, git, gitCommit, gitResult, lastLines } from './git.js'
import { validRecords } from './records.js'
import type { MergeOutcome, WorkspaceRecord } from './types.js'

/**
 * A worktree's branch, merged with `--no-ff` into the tree it was made from (a grandchild's
 * into its parent's worktree through that one's recorded git directory): what the child left
 * uncommitted is committed on the branch first; the parent's tree must have no uncommitted
 * changes to tracked files and no merge of its own in progress.
 */
export async function mergeWorktree(record: WorkspaceRecord, dir: string, discard: (record: WorkspaceRecord) => Promise<void>): Promise<MergeOutcome> {
  const repository = record.repository!
  const holder = record.derivedFrom === undefined ? undefined : validRecords(dir).find((other) => other.id === record.derivedFrom)
  if (!existsSync(repository) || (record.derivedFrom !== undefined && holder === undefined)) throw new WorkspaceError('MERGE_REFUSED', `the directory ${record.branch} was made from, ${repository}, is gone: there is nowhere to merge it (discard it)`)
  // Into a workspace of ours (a grandchild's into its parent's): through its recorded git directory, never its `.git` file.
  const at = parentTreeArgs(holder)
  const changes = await readChanges(record, undefined)
  if (changes.uncommitted && !changes.missing) {
    const inWorktree = gitArgs(record, undefined)
    if (await stageAll(record.root, inWorktree)) await gitCommit(record.root, inWorktree, ['commit', '--quiet', '--no-verify', '-m', `dsh: what ${record.label ?? record.childId} left uncommitted`], 'committing what the child left uncommitted')
  }
  const ahead = Number((await git(repository, [...at, 'rev-list', '--count', `${record.base}..refs/heads/${record.branch}`], 'counting the child\'s commits')).trim())
  if (ahead === 0) {
    await discard(record)
    return { ok: true, childId: record.childId, files: [], summary: `${record.branch} had no changes; the workspace was removed` }
  }
  // A merge of the parent's own in progress is its own to conclude: git would refuse ours, and aborting would throw its away.
  if (await mergeInProgress(repository, at)) {
    throw new WorkspaceError('MERGE_REFUSED', `the parent's tree is in the middle of a merge of its own (MERGE_HEAD exists); conclude or abort it before merging ${record.branch}`)
  }
  const dirty = (await git(repository, [...at, 'status', '--porcelain', '--untracked-files=no', '--ignore-submodules=dirty', '-z'], 'reading the parent\'s tree')).split('\0').filter(Boolean)
  if (dirty.length > 0) {
    throw new WorkspaceError('MERGE_REFUSED', `the parent's tree has uncommitted changes (${dirty.slice(0, 5).map((entry) => entry.slice(3)).join(', ')}); commit or stash them before merging ${record.branch}`)
  }
  const merged = await gitResult(repository, [...at, 'merge', '--no-ff', '--no-edit', '-m', `dsh: merge ${record.branch}${record.label ? ` (${record.label})` : ''}`, `refs/heads/${record.branch}`], { env: await commitEnvironment(repository, at) })
  if (merged.code !== 0) {
    const conflicts = (await gitResult(repository, [...at, 'diff', ...READ_ONLY_DIFF, '--name-only', '--diff-filter=U', '-z'])).stdout.split('\0').filter(Boolean)
    // Only a merge ours started (git refused some before starting one: nothing to abort).
    if (await mergeInProgress(repository, at)) await gitResult(repository, [...at, 'merge', '--abort'])
    if (conflicts.length === 0) throw new WorkspaceError('MERGE_REFUSED', `git would not merge ${record.branch}: ${lastLines(merged.stderr || merged.stdout)}`)
    return { ok: false, childId: record.childId, conflicts, summary: `merging ${record.branch} conflicts in ${conflicts.join(', ')}; nothing was changed (the branch and its workspace are kept)` }
  }
  const commit = (await git(repository, [...at, 'rev-parse', 'HEAD'], 'reading the merge')).trim()
  await discard(record)
  return { ok: true, childId: record.childId, files: changes.files, commit, summary: `merged ${record.branch}: ${changes.diffstat}` }
}

/**
 * A copy's changed files, written back into the directory copied, none of them if any was
 * changed there since the copy was made (unless it now holds exactly what the child wrote).
 */
export async function mergeCopy(record: WorkspaceRecord, gitDir: string, discard: (record: WorkspaceRecord) => Promise<void>): Promise<MergeOutcome> {
  const changes = await readChanges(record, gitDir)
  if (changes.missing) throw new WorkspaceError('MERGE_REFUSED', `the copy ${record.root} is gone: there is nothing to bring back`)
  if (!existsSync(record.source)) throw new WorkspaceError('MERGE_REFUSED', `the directory the copy was made from, ${record.source}, is gone: there is nowhere to bring it back to (discard it)`)
  // A file changed in the parent since the copy was made would be overwritten: a conflict
  // (unless the parent holds exactly what the child wrote). Compared by git's blob ids.
  const at = gitArgs(record, gitDir)
  const blobOf = async (path: string) => (existsSync(path) ? (await git(record.root, [...at, 'hash-object', '--no-filters', '--', path], 'reading a file')).trim() : undefined)
  const conflicts: string[] = []
  for (const file of changes.files) {
    const original = await gitResult(record.root, [...at, 'rev-parse', '--verify', '--quiet', `${record.base}:${file.path}`])
    const before = original.code === 0 ? original.stdout.trim() : undefined
    const parentNow = await blobOf(join(record.source, file.path))
    if (parentNow === before) continue
    if (parentNow === (await blobOf(join(record.root, file.path)))) continue
    conflicts.push(file.path)
  }
  if (conflicts.length > 0) {
    return { ok: false, childId: record.childId, conflicts, summary: `${conflicts.length === 1 ? 'this file was' : 'these files were'} changed in the parent's directory since the copy was made: ${conflicts.join(', ')}; nothing was changed (the copy is kept)` }
  }
  for (const file of changes.files) {
    const from = join(record.root, file.path)
    const to = join(record.source, file.path)
    if (file.status === 'deleted') rmSync(to, { force: true })
    else {
      mkdirSync(dirname(to), { recursive: true })
      cpSync(from, to, { force: true, verbatimSymlinks: true })
    }
  }
  await discard(record)
  return { ok: true, childId: record.childId, files: changes.files, summary: `copied back ${changes.diffstat}` }
}

async function mergeInProgress(repository: string, at: readonly string[]): Promise<boolean> {
  return (await gitResult(repository, [...at, 'rev-parse', '--quiet', '--verify', 'MERGE_HEAD'])).code === 0
}
