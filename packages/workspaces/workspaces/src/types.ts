import type { WorkspaceRef } from '@dsh/session'

/** How a child works: in its parent's directory (`shared`), or in a workspace of its own. */
export type WorkspaceMode = 'shared' | 'worktree' | 'copy'

export const WORKSPACE_MODES: readonly WorkspaceMode[] = ['shared', 'worktree', 'copy']

/** What asks for a workspace. */
export interface WorkspaceRequest {
  mode: 'worktree' | 'copy'
  /** The parent's directory: for `worktree` anywhere in a git repository, for `copy` the directory copied. */
  source: string
  /** The child's id (its session id in process, or the delegation's), named in the branch and the record. */
  childId: string
  /** The delegation's label, for the branch name. */
  label?: string
  /** The delegation tree (its root agent's id): `maxLivePerTree` counts per tree. */
  tree: string
  /** The agent that delegated (the child's parent): it, and its ancestors, may act on the workspace. */
  parentAgent: string
  /** That agent's ancestors, nearest first, up to the tree's root (none when it is the root). */
  ancestorAgents: readonly string[]
}

/** One file a child changed in its workspace, relative to where the workspace started. */
export interface ChangedFile {
  path: string
  /** `added`, `modified`, `deleted`, `renamed`. */
  status: 'added' | 'modified' | 'deleted' | 'renamed'
  /** Lines added and removed (absent for binary files). */
  added?: number
  removed?: number
}

/** What a child changed in its workspace: what its result carries. */
export interface WorkspaceChanges {
  childId: string
  mode: 'worktree' | 'copy'
  path: string
  branch?: string
  files: ChangedFile[]
  /** `3 files changed, 10 insertions(+), 2 deletions(-)`. */
  diffstat: string
  /** Whether the child made commits of its own on its branch (worktree). */
  committed: boolean
  /** Whether it left changes uncommitted (they are committed for it when it is merged). */
  uncommitted: boolean
  /** The workspace directory was gone when it was looked at (the child removed it). */
  missing?: true
}

/** What bringing a workspace back did. */
export type MergeOutcome =
  | { ok: true; childId: string; files: ChangedFile[]; commit?: string; summary: string }
  | { ok: false; childId: string; conflicts: string[]; summary: string }

/** A workspace as the registry on disk records it (`dsh workspaces list`). */
export interface WorkspaceRecord {
  id: string
  childId: string
  tree: string
  mode: 'worktree' | 'copy'
  /** The workspace's root directory. */
  root: string
  /** The child's working directory in it (its root, or the same subdirectory as the parent's). */
  path: string
  /** The parent's directory it came from, and (worktree) the repository's top level. */
  source: string
  repository?: string
  /** Worktree: the repository's common git directory (where the worktree's commits go). */
  gitDir?: string
  /**
   * Worktree: its own administrative directory in the repository (`.git/worktrees/<name>`),
   * read when it was made. dsh's own git commands name it instead of trusting the
   * worktree's `.git` file, which the child could have rewritten to point elsewhere.
   */
  worktreeGitDir?: string
  branch?: string
  /** The commit it started from. */
  base: string
  label?: string
  createdAt: string
  /** The process that made it; a record whose process is gone and that is still `live` is orphaned. */
  pid: number
  /** `live` while its child may still use it; `kept` once the child is done and it holds changes (or others were made from it). */
  state: 'live' | 'kept'
  /**
   * The agent that delegated, and its ancestors (nearest first): the agents that may merge,
   * discard or read it (`actingAgents`). Absent in records written before they were kept.
   */
  parentAgent?: string
  ancestorAgents?: string[]
  /**
   * The workspace this one was made from (a grandchild's, made from its parent's directory
   * in that parent's workspace): that one is kept while this one lives or is kept.
   */
  derivedFrom?: string
}

/**
 * A record on disk dsh would never have written (not JSON, or naming what `create` never
 * makes: a base that is not a commit id, a root outside the workspaces directory, …). It is
 * listed as an orphan with the reason, and cleaning it removes the record file alone:
 * nothing it names is acted on.
 */
export interface InvalidWorkspaceRecord {
  /** The record file's name without `.json`. */
  id: string
  file: string
  /** Why it cannot be trusted. */
  invalid: string
  orphaned: true
  /** The child it names, when it names one (for display only). */
  childId?: string
}

/** What `list` gives: each record with whether it is an orphan, or an invalid one. */
export type ListedWorkspace = (WorkspaceRecord & { orphaned: boolean; invalid?: undefined }) | InvalidWorkspaceRecord

export type { WorkspaceRef }
