import { DshError } from '@dsh/base'

export type WorkspaceErrorCode =
  /** `worktree` asked of a directory that is not in a git repository. */
  | 'NOT_A_REPOSITORY'
  /** The repository has uncommitted changes: a worktree starts from a commit. */
  | 'DIRTY_TREE'
  /** The repository has submodules, which a worktree would not carry. */
  | 'SUBMODULES'
  /** The branch a child's worktree would be on exists already. */
  | 'BRANCH_EXISTS'
  /** More live workspaces in one tree than `maxLivePerTree`. */
  | 'TOO_MANY'
  /** No workspace of that child (or it was merged or discarded already). */
  | 'NOT_FOUND'
  /** Other workspaces were made from it and live or are kept: it goes after them. */
  | 'IN_USE'
  /** A merge that would clash with the parent's tree, or that git refused. */
  | 'MERGE_REFUSED'
  /** git is not there. */
  | 'NO_GIT'
  /** A git command failed (its words are in the message). */
  | 'GIT_FAILED'
  /** A setting or an argument that cannot be used. */
  | 'INVALID'

export class WorkspaceError extends DshError<WorkspaceErrorCode> {}
