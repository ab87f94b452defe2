/**
 * A delegation with a workspace of its own (`request.workspace: worktree | copy`): the
 * workspace is made by `ctx.workspaces` once the child has its slot of the tree's cap and
 * before the provider is asked for anything (a failure there starts nothing; a child
 * waiting for a slot holds none), the child is started in it (`request.workingDirectory`),
 * its result carries what it changed, and when the run is disposed a workspace with no
 * changes is removed while one with changes is kept for its parent to merge or discard.
 * Loaded only when a request asks for a workspace: no other child pays for it.
 */
import { errorMessage } from '@dsh/base'
import type { WorkspaceRef } from '@dsh/session'
import { SubagentError } from './errors.js'
import { wrapRun } from './run-wrap.js'
import type { SubagentRequest, SubagentResult, SubagentRun, SubagentWorkspaceReport } from './types.js'

/** What this module needs of `ctx.workspaces` (`@dsh/workspaces`), read by shape: that package is not a dependency of this one. */
export interface WorkspaceHost {
  create(request: { mode: 'worktree' | 'copy'; source: string; childId: string; label?: string; tree: string; parentAgent: string; ancestorAgents: readonly string[] }): Promise<{ ref: WorkspaceRef }>
  changes(childId: string): Promise<Omit<SubagentWorkspaceReport, 'kept'> & { childId: string }>
  release(childId: string): Promise<unknown>
  discard(childId: string): Promise<void>
  rename(from: string, to: string, options?: { persistent?: boolean }): void
}

let made = 0

/** Make the workspace `request` asks for; resolves with the key it is held under and the working directory the child starts in. */
export async function makeWorkspace(workspaces: WorkspaceHost | undefined, request: Pick<SubagentRequest, 'parent' | 'label' | 'workspace'>): Promise<{ key: string; workingDirectory: { cwd: string; workspace: WorkspaceRef } }> {
  const mode = request.workspace as 'worktree' | 'copy'
  if (workspaces === undefined) {
    throw new SubagentError('UNSUPPORTED_CAPABILITY', `workspace: ${mode} needs the workspace service in the composition (- id: workspaces, name: "@dsh/workspaces")`)
  }
  const key = `pending-${process.pid}-${++made}`
  let ref: WorkspaceRef
  try {
    // The delegating agent and its ancestors are recorded with it: they alone may merge, discard or read it.
    const { parent } = request
    const ancestorAgents = Array.from(parent.ancestors(), (above) => above.id)
    ;({ ref } = await workspaces.create({ mode, source: parent.session.header.cwd, childId: key, ...(request.label !== undefined && { label: request.label }), tree: parent.root.id, parentAgent: parent.id, ancestorAgents }))
  } catch (error) {
    throw new SubagentError('INVALID_REQUEST', `the child's ${mode} workspace could not be made: ${errorMessage(error)}`, { cause: error })
  }
  return { key, workingDirectory: { cwd: ref.path, workspace: ref } }
}

/**
 * `run` in its workspace (held under `key` until now): renamed to the child's id, its
 * result carrying what it changed, its disposal releasing the workspace.
 */
export function inWorkspace(workspaces: WorkspaceHost, key: string, run: SubagentRun): SubagentRun {
  workspaces.rename(key, run.id)
  const result = run.result.then(async (settled): Promise<SubagentResult> => {
    try {
      const { childId: _childId, ...changes } = await workspaces.changes(run.id)
      return { ...settled, workspace: { ...changes, kept: changes.files.length > 0 || changes.committed || changes.missing === true } }
    } catch (error) {
      const diagnostic = `${settled.diagnostic ? `${settled.diagnostic}; ` : ''}its workspace could not be read: ${errorMessage(error)}`
      return { ...settled, diagnostic }
    }
  })
  let disposal: Promise<void> | undefined
  const dispose = () =>
    (disposal ??= run
      .dispose()
      .then(() => result)
      .then(
        () => workspaces.release(run.id).then(() => undefined),
        () => workspaces.release(run.id).then(() => undefined),
      )
      .catch(() => undefined))
  return wrapRun(run, { result, dispose })
}
