/**
 * The one start pipeline of `ctx.subagents`: every delegation, one-shot (`start`) or
 * continuable (`startContinuable`), passes the same stages in the same order, each
 * `(delegation, next) => started`:
 *
 *   admit → own approvals → observe → gate (slot and budget) → workspace → provider
 *
 * - admit: the provider by name and the request's checks (`admission.ts`), once;
 * - own approvals: this process's permission rules, and its broker's default for the
 *   parent's tree, go with the child (no broker: nothing is added);
 * - observe: the run's progress channel and its `subagent/start`/`subagent/end` (a
 *   continuable child's manager announces its own turns): it wraps everything after it,
 *   so its events report the run as the caller gets it (a budget's stop included) and the
 *   channel exists before the gate counts the child's usage reports into it;
 * - gate: the tree's slot and budget (`tree-limits.ts`), when limits are in use: a child
 *   waits for its slot here, before anything is made for it;
 * - workspace: a worktree or copy of its own (`workspace-start.ts`), made only once it has
 *   its slot, removed again when a later stage fails;
 * - provider: the provider's start (or the continuation manager's), with the request the
 *   service built for it.
 *
 * The caller's request is never changed: what the stages add for the provider
 * (`ProviderAdditions`) is kept beside it and joined with it once, at the provider, and not
 * at all when nothing was added (a plain fan-out allocates no copy). A stage that has
 * nothing to do calls `next()` and returns its promise as it is: no frame, no tick.
 */
import { admit } from './admission.js'
import type { ContinuableRequest, ContinuableStarted, StartContinuableOptions } from './continuable/types.js'
import type { ChildBudget, ProgressSink, SubagentProvider, SubagentRequest, SubagentRun } from './types.js'
import type { PermissionLevel, WorkspaceRef } from '@dsh/session'

/** What the service adds to a caller's request for its provider, stage by stage. */
export interface ProviderAdditions {
  /** The tighter depth bound admission found (a one-shot child's, for a provider that bounds depth). */
  maxDepth?: number
  /** The caller's permission levels joined with this process's own. */
  permissions?: readonly PermissionLevel[]
  /**
   * The broker's default for the parent's tree (`SubagentRequest.approvalDefault`):
   * `'unsaid'` when the caller's own must go and nothing replaces it.
   */
  approvalDefault?: 'allow' | 'reject' | 'unsaid'
  /** What the child may still use (the tree gate's). */
  budget?: ChildBudget
  /** The progress channel somebody listens to. */
  progress?: ProgressSink
  /** The tree gate's count of the child's usage reports, put in front of `progress`. */
  countUsage?: (downstream: ProgressSink | undefined) => ProgressSink
  /** The workspace of its own the child starts in. */
  workingDirectory?: { cwd: string; workspace: WorkspaceRef }
}

/** What a delegation's start resolves with: a one-shot run, or a continuable child's first accepted message. */
export type Started = SubagentRun | ContinuableStarted

/** One start on its way through the stages. */
export class Delegation {
  /** Set by the admit stage. */
  provider!: SubagentProvider
  /** The depth bound admission found (the manager bounds a continuable child by it). */
  maxDepth: number | undefined
  readonly added: ProviderAdditions = {}

  constructor(
    /** The provider's name, as the caller asked for it. */
    readonly name: string,
    /** The caller's request (a continuable one with the options' signal), as given. */
    readonly request: SubagentRequest,
    /** The caller's options of a continuable start; undefined for a one-shot one. */
    readonly continuable?: StartContinuableOptions,
  ) {}

  /** The request the provider gets: the caller's, with what the stages added; the caller's own when nothing was. */
  forProvider(): SubagentRequest {
    const { request, added } = this
    // A caller's own `progress` is ignored (see `SubagentRequest.progress`): the copy sets it.
    const progress = added.countUsage !== undefined ? added.countUsage(added.progress) : added.progress
    if (added.maxDepth === undefined && added.permissions === undefined && added.approvalDefault === undefined && added.budget === undefined && added.workingDirectory === undefined && progress === undefined && request.progress === undefined) return request
    const forProvider: SubagentRequest = { ...request, progress }
    if (added.maxDepth !== undefined) forProvider.maxDepth = added.maxDepth
    if (added.permissions !== undefined) forProvider.permissions = added.permissions
    if (added.approvalDefault !== undefined) forProvider.approvalDefault = added.approvalDefault === 'unsaid' ? undefined : added.approvalDefault
    if (added.budget !== undefined) forProvider.budget = added.budget
    if (added.workingDirectory !== undefined) {
      forProvider.workspace = 'shared'
      forProvider.workingDirectory = added.workingDirectory
    }
    return forProvider
  }

  /** A continuable child's request for the continuation manager: the caller's, with what the stages added. */
  forManager(): ContinuableRequest {
    const request = this.continuable!.request
    const { added } = this
    if (added.permissions === undefined && added.approvalDefault === undefined && added.budget === undefined && added.workingDirectory === undefined) return request
    const forManager: ContinuableRequest = { ...request }
    if (added.permissions !== undefined) forManager.permissions = added.permissions
    if (added.approvalDefault !== undefined) forManager.approvalDefault = added.approvalDefault === 'unsaid' ? undefined : added.approvalDefault
    if (added.budget !== undefined) forManager.budget = added.budget
    if (added.workingDirectory !== undefined) {
      forManager.workspace = 'shared'
      forManager.workingDirectory = added.workingDirectory
    }
    return forManager
  }
}

/** One stage: it does its part, calls `next()` at most once and returns what that started (wrapped, when it must). */
export type StartStage = (delegation: Delegation, next: () => Promise<Started>) => Promise<Started>

/** Run `delegation` through `stages` in order; the last stage starts the child and calls no `next`. */
export function runStages(stages: readonly StartStage[], delegation: Delegation): Promise<Started> {
  let at = 0
  const next = (): Promise<Started> => {
    const stage = stages[at++]
    if (stage === undefined) throw new Error('the start pipeline ended without a provider stage')
    return stage(delegation, next)
  }
  return next()
}

/** The admit stage: the provider by name and every check of the request, before anything exists. */
export function admitStage(providers: ReadonlyMap<string, SubagentProvider>): StartStage {
  return (delegation, next) => {
    const { provider, maxDepth } = admit(providers, delegation.name, delegation.request)
    delegation.provider = provider
    delegation.maxDepth = maxDepth
    // A one-shot child is told the tighter bound; the manager tells a continuable one itself.
    if (delegation.continuable === undefined && maxDepth !== delegation.request.maxDepth && provider.capabilities.depthLimit) delegation.added.maxDepth = maxDepth
    return next()
  }
}
